// The licensing models of docs/protocol.md 12 against FakeServer: trials, entitlements, offline license files
// with their state file, and the grace period of the calls and of a running heartbeat.
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "crypto.hpp"
#include "heartbeat-events.hpp"
#include "internal.hpp"
#include "runner.hpp"
#include "support.hpp"

using keywarden::ErrorCode;
using keywarden::HttpResponse;
using keywarden::TransportError;
using kwtest::FakeRequest;
using kwtest::FakeServer;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace d = keywarden::detail;

namespace {

const std::string kHwid = "hwid-aaaaaaaa";

/** A fresh temporary directory, removed with the object. */
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("kw-cpp-models-" + d::toHex(d::randomBytes(8)));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

keywarden::Options options(const TempDir& dir, std::atomic<std::int64_t>* shiftMs = nullptr) {
  keywarden::Options o;
  o.retries = 0;
  o.timeout = 2s;
  o.stateFile = dir.file("state.json");
  if (shiftMs) o.clock = [shiftMs] { return std::chrono::system_clock::now() + std::chrono::milliseconds(shiftMs->load()); };
  return o;
}

keywarden::Client activated(FakeServer& f, const TempDir& dir, std::atomic<std::int64_t>* shiftMs = nullptr) {
  auto c = f.client(options(dir, shiftMs));
  c.init();
  c.activateLicense("KEY-GOOD-0001", kHwid);
  return c;
}

std::int64_t lastSeenIn(const std::string& file) {
  return nlohmann::json::parse(kwtest::readFile(file))["last_seen"].get<std::int64_t>();
}

std::int64_t nowS() { return kwtest::unixSeconds(std::chrono::system_clock::now()); }

/** Heartbeat calls fail like a connection reset (the answer is lost) while `on` is set. */
void outage(FakeServer& f, std::atomic<bool>& on) {
  f.hook = [&on](const FakeRequest& q, FakeServer&) -> std::optional<HttpResponse> {
    if (on && q.path.rfind("/api/client/heartbeat", 0) == 0) throw TransportError(TransportError::Kind::network, true, "connection reset");
    return std::nullopt;
  };
}

}  // namespace

KW_TEST(models_trial, "models/a trial activates a key once per device, remembered for re-authentication") {
  FakeServer f;
  f.trialHours = 72;
  TempDir dir;
  auto c = f.client(options(dir));
  c.init();
  auto t = c.trial(kHwid);
  CHECK(t.key.rfind("TRIAL-", 0) == 0);
  CHECK_EQ(t.level, 1);
  CHECK(t.entitlements.empty());
  CHECK(t.expiresAt && kwtest::unixSeconds(*t.expiresAt) > nowS() + 71 * 3600);
  c.reauthenticate();
  CHECK_EQ(f.requests().back().body["license"].get<std::string>(), t.key);
  auto again = f.client(options(dir));
  again.init();
  auto e = EXPECT_ERROR(again.trial("HWID-AAAAAAAA"));
  CHECK_EQ(e.code(), ErrorCode::trial_used);
  CHECK_EQ(e.status(), 403);
  f.trialHours = 0;
  CHECK_EQ(EXPECT_ERROR(again.trial("hwid-bbbbbbbb")).code(), ErrorCode::trial_disabled);
}

KW_TEST(models_entitlements, "models/entitlements come sorted on the result and the client; anything but a list of codes is malformed") {
  FakeServer f;
  TempDir dir;
  auto c = f.client(options(dir));
  CHECK(c.entitlements().empty());
  c.init();
  auto lic = c.activateLicense("KEY-GOOD-0001", kHwid);
  CHECK_EQ(lic.entitlements.size(), 2u);
  CHECK_EQ(lic.entitlements[0], std::string("export"));
  CHECK(lic.hasEntitlement("pro") && c.hasEntitlement("export") && !c.hasEntitlement("enterprise"));
  auto user = c.login("alice", "pass-1234", kHwid);
  CHECK(user.hasEntitlement("pro"));
  f.entitlements.clear();
  c.activateLicense("KEY-GOOD-0002", kHwid);
  CHECK(c.entitlements().empty());
  f.hook = [](const FakeRequest& q, FakeServer& s) -> std::optional<HttpResponse> {
    if (q.path == "/api/client/license") return s.signedAnswer(q, 200, R"({"success":true,"level":3,"entitlements":"pro"})");
    return std::nullopt;
  };
  CHECK_EQ(EXPECT_ERROR(c.activateLicense("KEY-GOOD-0001", kHwid)).reason(), std::string("malformed"));
}

KW_TEST(models_offline_round_trip, "models/an offline file round trip, checked with no service at all") {
  FakeServer f;
  f.offlineDays = 7;
  TempDir dir;
  auto c = activated(f, dir);
  std::string file = c.offlineFile(kHwid);
  CHECK(file.rfind("kwlic1.", 0) == 0);
  struct NoNetwork : keywarden::Transport {
    HttpResponse send(const keywarden::HttpRequest&) override { throw std::runtime_error("no call expected"); }
  };
  auto o = options(dir);
  o.transport = std::make_shared<NoNetwork>();
  auto offline = keywarden::Client::fromConfig(f.configJson(), o);
  auto lic = offline.loadOffline(file + "\n", kHwid);
  CHECK_EQ(lic.appId, std::string("fake-app-0001"));
  CHECK_EQ(lic.level, 3);
  CHECK(!lic.user && !lic.expiresAt);
  CHECK_EQ(lic.entitlements.size(), 2u);
  CHECK(offline.hasEntitlement("pro"));
  CHECK(lic.validUntil - lic.issuedAt == std::chrono::hours(7 * 24));
  auto e = EXPECT_ERROR(offline.loadOffline(file, "hwid-bbbbbbbb"));
  CHECK_EQ(e.code(), ErrorCode::offline_invalid);
  CHECK_EQ(e.reason(), std::string("wrong_hwid"));
  CHECK_EQ(EXPECT_ERROR(c.offlineFile("hwid-bbbbbbbb")).code(), ErrorCode::hwid_mismatch);
  f.offlineDays = 0;
  CHECK_EQ(EXPECT_ERROR(c.offlineFile(kHwid)).code(), ErrorCode::offline_disabled);
}

KW_TEST(models_offline_refusals, "models/files of another key or app are refused; a config without app_id is a ConfigError") {
  FakeServer f;
  f.offlineDays = 7;
  TempDir dir;
  auto c = activated(f, dir);
  std::string file = c.offlineFile(kHwid);
  // The same payload signed by another key under the pinned kid.
  std::string payload = *d::base64UrlDecode(file.substr(7, file.find('.', 7) - 7));
  CHECK_EQ(EXPECT_ERROR(c.loadOffline(f.licenseFile(payload, d::sha256Raw("another key")), kHwid)).reason(), std::string("bad_signature"));
  auto cfg = nlohmann::json::parse(f.configJson());
  cfg["app_id"] = "another-app";
  CHECK_EQ(EXPECT_ERROR(keywarden::Client::fromConfig(cfg.dump(), options(dir)).loadOffline(file, kHwid)).reason(), std::string("wrong_app"));
  cfg.erase("app_id");
  bool configError = false;
  try {
    keywarden::Client::fromConfig(cfg.dump(), options(dir)).loadOffline(file, kHwid);
  } catch (const keywarden::ConfigError&) {
    configError = true;
  }
  CHECK(configError);
  std::string unpinned = f.licenseFile(R"({"v":1,"kid":"k9","app_id":"fake-app-0001","license_id":"l","user":null,"hwid":"hwid-aaaaaaaa",)"
                                       R"("level":1,"entitlements":[],"expires_at":null,"issued_at":"2026-01-01T00:00:00.000Z",)"
                                       R"("valid_until":"2099-01-01T00:00:00.000Z"})");
  CHECK_EQ(EXPECT_ERROR(c.loadOffline(unpinned, kHwid)).reason(), std::string("unknown_kid"));
  CHECK_EQ(EXPECT_ERROR(c.loadOffline("kwlic1.x.y", kHwid)).reason(), std::string("malformed"));
}

KW_TEST(models_state_file, "models/the state file catches a clock set back and is never lowered") {
  FakeServer f;
  f.offlineDays = 7;
  TempDir dir;
  std::atomic<std::int64_t> shift{0};
  auto c = activated(f, dir, &shift);
  std::string file = c.offlineFile(kHwid);
  c.loadOffline(file, kHwid);
  const std::string state = dir.file("state.json");
  CHECK_EQ(c.stateFile(), state);
  auto first = nlohmann::json::parse(kwtest::readFile(state));
  CHECK_EQ(first["v"].get<int>(), 1);
  CHECK(std::llabs(first["last_seen"].get<std::int64_t>() - nowS()) < 5);
  shift = 3LL * 86400 * 1000;
  c.loadOffline(file, kHwid);
  shift = 1LL * 86400 * 1000;
  CHECK_EQ(EXPECT_ERROR(c.loadOffline(file, kHwid)).reason(), std::string("clock_rolled_back"));
  CHECK(lastSeenIn(state) > nowS() + 2 * 86400 + 80000);  // never lowered
  shift = 8LL * 86400 * 1000;
  CHECK_EQ(EXPECT_ERROR(c.loadOffline(file, kHwid)).reason(), std::string("expired"));
}

KW_TEST(models_state_damaged, "models/a damaged state file counts as no record and is rewritten; an unwritable one does not stop the check") {
  FakeServer f;
  f.offlineDays = 7;
  TempDir dir;
  auto c = activated(f, dir);
  std::string file = c.offlineFile(kHwid);
  const std::string state = dir.file("state.json");
  for (const std::string& junk : {std::string(), std::string("not json"), std::string(R"({"last_seen":"yesterday"})"), std::string("\xff\xfe"),
                                 std::string("[1]")}) {
    std::ofstream(state, std::ios::binary | std::ios::trunc) << junk;
    CHECK_EQ(c.loadOffline(file, kHwid).level, 3);
    CHECK(std::llabs(lastSeenIn(state) - nowS()) < 5);
  }
  std::ofstream(dir.file("a-file")) << "x";
  auto o = options(dir);
  o.stateFile = dir.file("a-file") + "/state.json";
  CHECK_EQ(f.client(o).loadOffline(file, kHwid).level, 3);
}

KW_TEST(models_default_state_file, "models/the default state file is per user and application") {
#if !defined(_WIN32) && !defined(__APPLE__)
  const char* saved = std::getenv("XDG_STATE_HOME");
  std::string keep = saved ? saved : "";
  setenv("XDG_STATE_HOME", "/tmp/xdg-state", 1);
  std::string p = keywarden::defaultStateFile("kwpk_app_one");
  std::string other = keywarden::defaultStateFile("kwpk_app_two");
  if (saved) setenv("XDG_STATE_HOME", keep.c_str(), 1);
  else unsetenv("XDG_STATE_HOME");
  CHECK_EQ(fs::path(p).parent_path().string(), std::string("/tmp/xdg-state/keywarden"));
  CHECK_EQ(fs::path(p).filename().string().size(), std::string("0123456789abcdef.json").size());
  CHECK(p != other);
#else
  kwtest::skip("the XDG layout is the Linux default");
#endif
}

KW_TEST(models_grace_calls, "models/verified answers set the grace; a verified refusal ends it; 429 and unverified answers change nothing") {
  FakeServer f;
  f.graceSeconds = 3600;
  TempDir dir;
  auto c = f.client(options(dir));
  c.init();
  CHECK(!c.graceUntil());
  c.activateLicense("KEY-GOOD-0001", kHwid);
  CHECK(c.graceUntil() && std::llabs(kwtest::unixSeconds(*c.graceUntil()) - nowS() - 3600) < 5);
  CHECK(c.graceActive());
  auto before = c.graceUntil();
  f.hook = [](const FakeRequest& q, FakeServer& s) -> std::optional<HttpResponse> {
    if (q.path != "/api/client/license") return std::nullopt;
    // Correctly shaped, a month of grace, signed by a key the client does not pin.
    return s.signWith(q.path, 200, R"({"success":true,"level":3,"grace_until":"2099-01-01T00:00:00.000Z"})", q.headers.at("x-nonce"),
                      s.nowSeconds(), "k1", d::sha256Raw("another key"));
  };
  CHECK_EQ(EXPECT_ERROR(c.activateLicense("KEY-GOOD-0001", kHwid)).reason(), std::string("bad_signature"));
  CHECK(c.graceUntil() == before);
  f.hook = [](const FakeRequest& q, FakeServer& s) -> std::optional<HttpResponse> {
    if (q.path == "/api/client/license") return s.signedAnswer(q, 429, R"({"detail":"Rate limit exceeded"})");
    return std::nullopt;
  };
  CHECK_EQ(EXPECT_ERROR(c.activateLicense("KEY-GOOD-0001", kHwid)).code(), ErrorCode::rate_limited);
  CHECK(c.graceActive());
  f.hook = nullptr;
  CHECK_EQ(EXPECT_ERROR(c.activateLicense("KEY-UNKNOWN", kHwid)).code(), ErrorCode::invalid_key);
  CHECK(!c.graceUntil() && !c.graceActive());
  f.graceSeconds = -1;
  c.activateLicense("KEY-GOOD-0001", kHwid);
  CHECK(!c.graceUntil());
}

KW_TEST(models_gateway, "models/an unsigned gateway 502/503/504 is the service unreachable, an unsigned 500 an attack") {
  FakeServer f;
  TempDir dir;
  auto c = f.client(options(dir));
  c.init();
  for (int status : {502, 503, 504}) {
    f.hook = [status](const FakeRequest&, FakeServer&) -> std::optional<HttpResponse> {
      HttpResponse r;
      r.status = status;
      r.headers = {{"content-type", "text/html"}};
      r.body = "<html>bad gateway</html>";
      return r;
    };
    auto e = EXPECT_ERROR(c.activateLicense("KEY-GOOD-0001", kHwid));
    CHECK_EQ(e.code(), ErrorCode::server);
    CHECK_EQ(e.status(), status);
  }
  f.hook = [](const FakeRequest&, FakeServer&) -> std::optional<HttpResponse> {
    HttpResponse r;
    r.status = 500;
    r.body = "oops";
    return r;
  };
  CHECK_EQ(EXPECT_ERROR(c.activateLicense("KEY-GOOD-0001", kHwid)).reason(), std::string("unsigned"));
}

KW_TEST(models_hb_offline, "models heartbeat/unreachable within the grace is offline until a beat verifies") {
  FakeServer f;
  f.graceSeconds = 3600;
  TempDir dir;
  auto c = activated(f, dir);
  std::atomic<bool> down{false};
  outage(f, down);
  kwtest::HeartbeatEvents ev;
  auto o = ev.options(20ms);
  std::optional<keywarden::OfflineEvent> offline;
  int offlineCount = 0;
  o.onOffline = [&](const keywarden::OfflineEvent& e) {
    {
      std::lock_guard<std::mutex> lk(ev.mu);
      offline = e;
      ++offlineCount;
    }
    ev.add("offline");
  };
  auto hb = c.startHeartbeat("system-0001", "code-hash-0001", o);
  CHECK(hb.waitForBeats(1, 5s));
  down = true;
  CHECK(ev.waitFor("offline", 5s));
  CHECK(hb.state() == keywarden::HeartbeatState::offline);
  CHECK(c.graceActive());
  {
    std::lock_guard<std::mutex> lk(ev.mu);
    CHECK_EQ(offline->error.code(), ErrorCode::network);
    CHECK(std::llabs(kwtest::unixSeconds(offline->graceUntil) - nowS() - 3600) < 10);
  }
  std::int64_t beats = 0;
  {
    std::unique_lock<std::mutex> lk(ev.mu);
    ev.cv.wait_for(lk, 5s, [&] { return ev.degraded.size() >= 3; });
    CHECK(ev.degraded.size() >= 3);
    CHECK_EQ(offlineCount, 1);
  }
  for (const auto& l : ev.snapshot()) beats += l.rfind("beat ", 0) == 0 ? 1 : 0;
  down = false;
  CHECK(hb.waitForBeats(beats + 1, 5s));
  CHECK(hb.state() == keywarden::HeartbeatState::healthy);
  hb.stop();
}

KW_TEST(models_hb_grace_expired, "models heartbeat/the grace runs out while unreachable: grace_expired once, state degraded") {
  FakeServer f;
  f.graceSeconds = 60;
  TempDir dir;
  std::atomic<std::int64_t> shift{0};
  auto c = activated(f, dir, &shift);
  std::atomic<bool> down{false};
  outage(f, down);
  kwtest::HeartbeatEvents ev;
  auto o = ev.options(20ms);
  std::atomic<int> expired{0};
  std::optional<keywarden::TimePoint> endedAt;
  o.onOffline = [&](const keywarden::OfflineEvent&) { ev.add("offline"); };
  o.onGraceExpired = [&](const keywarden::GraceExpiredEvent& e) {
    {
      std::lock_guard<std::mutex> lk(ev.mu);
      endedAt = e.graceUntil;
    }
    ++expired;
    ev.add("grace_expired");
  };
  auto hb = c.startHeartbeat("system-0001", "code-hash-0001", o);
  down = true;
  CHECK(ev.waitFor("offline", 5s));
  shift = 120 * 1000;
  CHECK(ev.waitFor("grace_expired", 5s));
  {
    std::unique_lock<std::mutex> lk(ev.mu);
    std::size_t seen = ev.degraded.size();
    ev.cv.wait_for(lk, 5s, [&] { return ev.degraded.size() >= seen + 3; });
    CHECK(endedAt == c.graceUntil());
  }
  CHECK_EQ(expired.load(), 1);
  CHECK(!c.graceActive());
  CHECK(hb.state() == keywarden::HeartbeatState::degraded);
  hb.stop();
}

KW_TEST(models_hb_refusal, "models heartbeat/without grace only degraded; a bad proof extends nothing; a verified refusal ends the grace") {
  {
    FakeServer f;
    TempDir dir;
    auto c = activated(f, dir);
    std::atomic<bool> down{true};
    kwtest::HeartbeatEvents ev;
    auto o = ev.options(20ms);
    o.onOffline = [&](const keywarden::OfflineEvent&) { ev.add("offline"); };
    auto hb = c.startHeartbeat("system-0001", "code-hash-0001", o);
    outage(f, down);
    std::unique_lock<std::mutex> lk(ev.mu);
    ev.cv.wait_for(lk, 5s, [&] { return ev.degraded.size() >= 3; });
    lk.unlock();
    CHECK(hb.state() == keywarden::HeartbeatState::degraded);
    CHECK(!ev.has("offline"));
    hb.stop();
  }
  FakeServer f;
  f.graceSeconds = 60;
  TempDir dir;
  auto c = activated(f, dir);
  kwtest::HeartbeatEvents ev;
  auto hb = c.startHeartbeat("system-0002", "code-hash-0001", ev.options(20ms));
  auto started = c.graceUntil();
  f.hook = [](const FakeRequest& q, FakeServer& s) -> std::optional<HttpResponse> {
    // Correctly signed, a month of grace, but its proof is wrong (and the server did not move on).
    if (q.path == "/api/client/heartbeat")
      return s.signedAnswer(q, 200, R"({"success":true,"new_token":"TTeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee","beat_count":1,)"
                                    R"("proof":"bm9wZQ==","grace_until":"2099-01-01T00:00:00.000Z"})");
    return std::nullopt;
  };
  {
    std::unique_lock<std::mutex> lk(ev.mu);
    ev.cv.wait_for(lk, 5s, [&] { return ev.degraded.size() >= 2; });
    CHECK(ev.degraded.size() >= 2);
    CHECK_EQ(ev.degraded[1].error.reason(), std::string("bad_proof"));
  }
  CHECK(c.graceUntil() == started);
  f.hook = [](const FakeRequest& q, FakeServer& s) -> std::optional<HttpResponse> {
    if (q.path == "/api/client/heartbeat") return s.signedAnswer(q, 403, R"({"detail":"rejected"})");
    return std::nullopt;
  };
  CHECK(ev.waitFor("killed", 5s));
  CHECK(!c.graceUntil());
}

KW_TEST(models_hb_offline_ends_with_grace, "models heartbeat/state leaves offline the moment graceUntil passes, before any beat fails") {
  FakeServer f;
  f.graceSeconds = 60;
  TempDir dir;
  std::atomic<std::int64_t> shift{0};
  auto c = activated(f, dir, &shift);
  std::atomic<bool> down{false};
  outage(f, down);
  kwtest::HeartbeatEvents ev;
  auto o = ev.options(20ms);
  keywarden::Heartbeat* self = nullptr;
  std::vector<std::string> seen;
  o.onOffline = [&](const keywarden::OfflineEvent&) {
    // On the heartbeat's thread, inside the failed beat: no other beat can run meanwhile.
    seen.push_back(keywarden::to_string(self->state()));
    shift = 61 * 1000;
    seen.push_back(keywarden::to_string(self->state()));
    ev.add("offline");
  };
  auto hb = c.startHeartbeat("system-0001", "code-hash-0001", o);
  self = &hb;
  down = true;
  CHECK(ev.waitFor("offline", 5s));
  {
    std::lock_guard<std::mutex> lk(ev.mu);
    CHECK_EQ(seen.size(), static_cast<std::size_t>(2));
    if (seen.size() == 2) {
      CHECK_EQ(seen[0], std::string("offline"));
      CHECK_EQ(seen[1], std::string("degraded"));
    }
  }
  CHECK(!c.graceActive());
  hb.stop();
}

namespace {
std::int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

KW_TEST(models_expiry_refused, "models expiry/a beat refused after the known expiry is expired (killed with code expired), on time over REST, no grace") {
  FakeServer f;
  f.graceSeconds = 3600;
  f.expiresAtMs = nowMs() + 300;
  f.enforceExpiry = true;
  TempDir dir;
  auto c = activated(f, dir);
  CHECK(c.expiresAt() && std::chrono::duration_cast<std::chrono::milliseconds>(c.expiresAt()->time_since_epoch()).count() == f.expiresAtMs.load());
  kwtest::HeartbeatEvents ev;
  auto o = ev.options(60s);  // a beat a minute: only the beat just after the expiry can tell it within seconds
  o.channel = false;
  auto hb = c.startHeartbeat("system-0001", "code-hash-0001", o);
  CHECK(ev.waitFor("expired", 5s));
  const std::int64_t late = nowMs() - f.expiresAtMs.load();
  CHECK_MSG(late >= 0 && late < 2500, "expired " + std::to_string(late) + " ms after the expiry");
  CHECK(hb.waitUntilEnded(5s));
  CHECK(hb.state() == keywarden::HeartbeatState::expired);
  CHECK(!hb.running());
  {
    std::lock_guard<std::mutex> lk(ev.mu);
    CHECK(ev.killedWith && ev.killedWith->code() == ErrorCode::expired);
    CHECK(ev.expiredWith && ev.expiredWith->expiresAt == c.expiresAt());
  }
  CHECK(!c.graceUntil());
  for (const auto& l : ev.snapshot()) CHECK_MSG(l.rfind("beat ", 0) != 0 && l.rfind("revoked", 0) != 0, l);
}

KW_TEST(models_expiry_unreachable, "models expiry/no answer after the known expiry is expired too (the grace never covers an expiry)") {
  FakeServer f;
  f.graceSeconds = 3600;
  f.expiresAtMs = nowMs() + 300;
  TempDir dir;
  auto c = activated(f, dir);
  std::atomic<bool> down{false};
  outage(f, down);
  kwtest::HeartbeatEvents ev;
  auto o = ev.options(60s);
  o.channel = false;
  auto hb = c.startHeartbeat("system-0001", "code-hash-0001", o);
  down = true;
  CHECK(ev.waitFor("expired", 5s));
  CHECK(hb.waitUntilEnded(5s));
  CHECK(hb.state() == keywarden::HeartbeatState::expired);
  CHECK(!c.graceActive());
}

KW_TEST(models_expiry_plain_kill_and_extended, "models expiry/a refusal long before the known expiry is a plain kill; beats accepted well after it go on") {
  {
    FakeServer f;
    TempDir dir;
    auto c = activated(f, dir);
    kwtest::HeartbeatEvents ev;
    auto o = ev.options(20ms);
    o.channel = false;
    auto hb = c.startHeartbeat("system-0001", "code-hash-0001", o);
    CHECK(hb.waitForBeats(1, 5s));
    f.hook = [](const FakeRequest& q, FakeServer& s) -> std::optional<HttpResponse> {
      if (q.path == "/api/client/heartbeat") return s.signedAnswer(q, 403, R"({"detail":"rejected"})");
      return std::nullopt;
    };
    CHECK(ev.waitFor("killed", 5s));
    CHECK(hb.state() == keywarden::HeartbeatState::killed);
    CHECK(!ev.has("expired"));
  }
  FakeServer f;
  f.expiresAtMs = nowMs() + 200;
  TempDir dir;
  auto c = activated(f, dir);
  kwtest::HeartbeatEvents ev;
  auto o = ev.options(400ms);
  o.channel = false;
  auto hb = c.startHeartbeat("system-0002", "code-hash-0001", o);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::int64_t n = 1;
  while (c.expiresAt() && std::chrono::steady_clock::now() < deadline) hb.waitForBeats(n++, 5s);
  CHECK_MSG(!c.expiresAt(), "the known expiry is forgotten once beats are accepted well after it");
  CHECK(hb.waitForBeats(n + 1, 5s));
  CHECK(hb.state() == keywarden::HeartbeatState::healthy);
  CHECK(!ev.has("expired"));
  hb.stop();
}
