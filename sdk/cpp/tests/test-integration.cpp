// Against a real Keywarden server prepared by test/helpers/sdk-harness.ts (apps PLAIN, SIGNED and
// OUTDATED, 30 keys each, tamper proxies). Skipped without KW_BASE_URL. Keys are taken from the
// front of KW_KEYS_PLAIN / KW_KEYS_SIGNED; the C smoke test and the repository's e2e test take the last
// three. Direct calls come from 127.0.0.1: this file stays under init 30/min and
// register/login/license 20/min each.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <random>
#include <set>
#include <sstream>

#include "heartbeat-events.hpp"
#include "runner.hpp"
#include "support.hpp"

using keywarden::ErrorCode;
using keywarden::HttpRequest;
using keywarden::HttpResponse;
using keywarden::TransportError;
using kwtest::env;
using kwtest::HeartbeatEvents;
using kwtest::takeKey;
using namespace std::chrono_literals;

namespace {

std::string uniqueName(const char* prefix) {
  std::random_device rd;
  return std::string(prefix) + std::to_string(rd() % 1000000000u);
}

std::string tamperUrl(const std::string& mode) {
  auto urls = nlohmann::json::parse(env("KW_TAMPER_URLS"));
  if (!urls.contains(mode)) throw kwtest::Failure{"KW_TAMPER_URLS has no mode " + mode};
  return urls[mode].get<std::string>();
}

/** A transport around libcurl that records answers and lets a test drop or lose a request. */
class Recording : public keywarden::Transport {
 public:
  HttpResponse send(const HttpRequest& r) override {
    std::string path = r.url.substr(r.url.find("/api/"));
    if (before) before(path);
    HttpResponse res = inner_->send(r);
    {
      std::lock_guard<std::mutex> lk(mu_);
      log_.push_back({path, res});
    }
    if (after) after(path);
    return res;
  }
  std::vector<std::pair<std::string, HttpResponse>> log() const {
    std::lock_guard<std::mutex> lk(mu_);
    return log_;
  }
  std::function<void(const std::string&)> before;  // throw TransportError(sent=false) = never reached the server
  std::function<void(const std::string&)> after;   // throw TransportError(sent=true) = the answer was lost

 private:
  std::shared_ptr<keywarden::Transport> inner_ = keywarden::makeCurlTransport();
  mutable std::mutex mu_;
  std::vector<std::pair<std::string, HttpResponse>> log_;
};

keywarden::Client plainClient(keywarden::Options o = {}) { return keywarden::Client::fromConfig(env("KW_CONFIG_PLAIN"), std::move(o)); }

nlohmann::json ownerGet(const std::string& path) {
  HttpRequest r;
  r.method = "GET";
  r.url = env("KW_BASE_URL") + path;
  r.headers = {{"Authorization", "Bearer " + env("KW_OWNER_TOKEN")}, {"Accept", "application/json"}};
  auto res = keywarden::makeCurlTransport()->send(r);
  if (res.status != 200) throw kwtest::Failure{"GET " + path + " answered " + std::to_string(res.status)};
  return nlohmann::json::parse(res.body);
}

// Faster than the app's 5 s beat_interval: allowed, only late beats drift.
constexpr std::chrono::milliseconds kLiveBeat = 700ms;

const std::string kHwidA = "cpp-sdk-hwid-aaaaaaaa";
const std::string kHwidB = "cpp-sdk-hwid-bbbbbbbb";

}  // namespace

KW_INTEGRATION(init, "init returns the app and learns the server clock") {
  auto c = plainClient();
  auto app = c.init();
  CHECK_EQ(app.name, std::string("SDK PLAIN"));
  CHECK(app.hwidLock);
  CHECK_EQ(app.session.size(), std::size_t{43});
  CHECK(c.clockOffset().has_value());
  CHECK(std::abs(c.clockOffset()->count()) < 5000);
}

KW_INTEGRATION(register_login, "registerUser logs in right after (last_login is set); login works again later") {
  std::vector<std::string> events;
  keywarden::Options o;
  o.logger = [&](keywarden::LogLevel, const std::string& ev, const std::string&) { events.push_back(ev); };
  auto c = plainClient(o);
  c.init();
  std::string user = uniqueName("cpp_user_");
  auto u = c.registerUser(user, "cpp-pass-1", takeKey("KW_KEYS_PLAIN"), kHwidA);
  CHECK_EQ(u.username, user);
  CHECK_EQ(u.level, 3);
  CHECK(u.expiresAt.has_value());
  auto days = std::chrono::duration_cast<std::chrono::hours>(*u.expiresAt - std::chrono::system_clock::now()).count() / 24;
  CHECK(days >= 29 && days <= 30);
  CHECK(std::find(events.begin(), events.end(), "keywarden.register.login_failed") == events.end());
  // docs/spec.md: a new user's last_login is null; only the login right after register sets it.
  auto ids = nlohmann::json::parse(env("KW_APP_IDS"));
  bool found = false;
  for (const auto& row : ownerGet("/api/apps/" + ids["PLAIN"].get<std::string>() + "/users")) {
    if (row.value("username", "") != user) continue;
    found = true;
    CHECK(row.contains("last_login") && row["last_login"].is_string());
  }
  CHECK(found);
  // login on a fresh session; a wrong password is invalid_key (docs/spec.md: one 401 text for every cause)
  auto c2 = plainClient();
  c2.init();
  CHECK_EQ(c2.login(user, "cpp-pass-1", kHwidA).username, user);
  auto e = EXPECT_ERROR(c2.login(user, "wrong-pass", kHwidA));
  CHECK_EQ(e.code(), ErrorCode::invalid_key);
  CHECK_EQ(e.status(), 401);
}

KW_INTEGRATION(license_hwid, "activateLicense returns level and expiry; the key is locked to the first hwid") {
  std::string key = takeKey("KW_KEYS_PLAIN");
  auto c = plainClient();
  c.init();
  auto lic = c.activateLicense(key, kHwidA);
  CHECK_EQ(lic.level, 3);
  CHECK(lic.expiresAt.has_value());
  auto days = std::chrono::duration_cast<std::chrono::hours>(*lic.expiresAt - std::chrono::system_clock::now()).count() / 24;
  CHECK(days >= 29 && days <= 30);
  auto again = plainClient();
  again.init();
  auto same = again.activateLicense(key, kHwidA);
  CHECK(same.expiresAt == lic.expiresAt);
  auto other = plainClient();
  other.init();
  auto e = EXPECT_ERROR(other.activateLicense(key, kHwidB));
  CHECK_EQ(e.code(), ErrorCode::hwid_mismatch);
  CHECK_EQ(e.status(), 403);
  CHECK_EQ(EXPECT_ERROR(other.activateLicense("NOT-A-REAL-KEY", kHwidB)).code(), ErrorCode::invalid_key);
}

KW_INTEGRATION(heartbeat, "heartbeat: at least 3 beats with verified proofs, then stop") {
  auto c = plainClient();
  c.init();
  c.activateLicense(takeKey("KW_KEYS_PLAIN"), kHwidA);
  HeartbeatEvents ev;
  auto hb = c.startHeartbeat("cpp-system-0001", "cpp-code-hash-0001", ev.options(kLiveBeat));
  CHECK_EQ(hb.beatInterval().count(), 5);
  CHECK(hb.waitForBeats(3, 20s));
  CHECK(hb.beatCount() >= 3);
  hb.stop();
  CHECK(!hb.running());
  CHECK(!hb.killed());
  CHECK(ev.has("beat 1") && ev.has("beat 2") && ev.has("beat 3"));
  CHECK(ev.has("stopped stop"));
  CHECK(!ev.has("degraded lost"));
}

KW_INTEGRATION(heartbeat_stop_closes, "heartbeat: stop closes the server's heartbeat session (a new start is then allowed)") {
  auto c = plainClient();
  c.init();
  c.activateLicense(takeKey("KW_KEYS_PLAIN"), kHwidA);
  HeartbeatEvents ev;
  auto hb = c.startHeartbeat("cpp-system-0002", "cpp-code-hash-0002", ev.options(kLiveBeat));
  CHECK(hb.waitForBeats(1, 20s));
  // While it runs, the nonce already has a heartbeat session: docs/spec.md answers 409.
  auto e = EXPECT_ERROR(c.startHeartbeat("cpp-system-0002", "cpp-code-hash-0002"));
  CHECK_EQ(e.status(), 409);
  hb.stop();
  CHECK(ev.has("stopped stop"));
  // heartbeat/stop was accepted (right token): the session is gone and a new start succeeds.
  HeartbeatEvents ev2;
  auto again = c.startHeartbeat("cpp-system-0002", "cpp-code-hash-0002", ev2.options(kLiveBeat));
  CHECK(again.waitForBeats(1, 20s));
  again.stop();
}

KW_INTEGRATION(kill, "heartbeat: debugger_detected is killed by the server -> heartbeat_killed") {
  auto c = plainClient();
  c.init();
  c.activateLicense(takeKey("KW_KEYS_PLAIN"), kHwidA);
  HeartbeatEvents ev;
  auto o = ev.options(kLiveBeat);
  o.debuggerDetected = [] { return true; };
  auto hb = c.startHeartbeat("cpp-system-0003", "cpp-code-hash-0003", o);
  CHECK(hb.waitUntilEnded(20s));
  CHECK(hb.killed());
  CHECK(ev.has("killed"));
  CHECK(ev.has("stopped killed"));
  CHECK(!ev.has("beat 1"));
  std::lock_guard<std::mutex> lk(ev.mu);
  CHECK_EQ(ev.killedWith->code(), ErrorCode::heartbeat_killed);
  CHECK_EQ(ev.killedWith->status(), 403);
}

KW_INTEGRATION(lost_beat_reauth, "heartbeat: a beat whose answer was lost -> degraded, then init + same license + start again") {
  auto rec = std::make_shared<Recording>();
  std::atomic<int> beats{0};
  rec->after = [&](const std::string& path) {
    // The server processed beat 2 (its token moved on) but the answer never arrived.
    if (path == "/api/client/heartbeat" && ++beats == 2) throw TransportError(TransportError::Kind::network, true, "connection reset");
  };
  keywarden::Options o;
  o.transport = rec;
  auto c = plainClient(o);
  c.init();
  std::string key = takeKey("KW_KEYS_PLAIN");
  c.activateLicense(key, kHwidA);
  std::string firstSession = c.session();
  HeartbeatEvents ev;
  auto ho = ev.options(kLiveBeat);
  ho.reauth = true;
  auto hb = c.startHeartbeat("cpp-system-0004", "cpp-code-hash-0004", ho);
  CHECK(ev.waitFor("degraded lost", 20s));
  CHECK(ev.waitFor("recovered", 20s));
  CHECK(hb.waitForBeats(3, 20s));  // beat 1 before the loss, two on the new session
  hb.stop();
  CHECK(!ev.has("killed"));
  CHECK(c.session() != firstSession);
  std::vector<std::string> after;
  int seen = 0;
  for (const auto& [path, res] : rec->log()) {
    if (path == "/api/client/heartbeat") ++seen;
    else if (seen >= 2 && after.size() < 3) after.push_back(path + " " + std::to_string(res.status));
  }
  CHECK_EQ(after.size(), std::size_t{3});
  CHECK_EQ(after[0], std::string("/api/client/init 200"));
  CHECK_EQ(after[1], std::string("/api/client/license 200"));
  CHECK_EQ(after[2], std::string("/api/client/heartbeat/start 200"));
}

KW_INTEGRATION(unsent_beat, "heartbeat: a beat that never reached the server is resent with the same index and token") {
  auto rec = std::make_shared<Recording>();
  std::atomic<int> beats{0};
  rec->before = [&](const std::string& path) {
    if (path == "/api/client/heartbeat" && ++beats == 2) throw TransportError(TransportError::Kind::network, false, "connection refused");
  };
  keywarden::Options o;
  o.transport = rec;
  auto c = plainClient(o);
  c.init();
  c.activateLicense(takeKey("KW_KEYS_PLAIN"), kHwidA);
  HeartbeatEvents ev;
  auto hb = c.startHeartbeat("cpp-system-0005", "cpp-code-hash-0005", ev.options(kLiveBeat));
  CHECK(hb.waitForBeats(3, 20s));
  hb.stop();
  CHECK(!ev.has("degraded lost"));
  CHECK(!ev.has("degraded unsent"));  // resent inside the call: the host never noticed
  CHECK(beats.load() >= 4);           // 1, 2 (dropped), 2 again (accepted by the server), 3
}

KW_INTEGRATION(update_required, "init of an outdated client -> update_required with latest_version and update_url") {
  auto c = keywarden::Client::fromConfig(env("KW_CONFIG_OUTDATED"));
  auto e = EXPECT_ERROR(c.init());
  CHECK_EQ(e.code(), ErrorCode::update_required);
  CHECK_EQ(e.status(), 426);
  CHECK_EQ(e.latestVersion(), std::string("2.0"));
  CHECK_EQ(e.updateUrl(), std::string("https://example.com/download/2.0"));
  CHECK(std::string(e.what()).find("Version 2.0 is out.") != std::string::npos);
}

KW_INTEGRATION(rate_limited, "a spent rate limit -> rate_limited with retry_after (the server's own signed 429)") {
  keywarden::Options o;
  o.baseUrl = tamperUrl("rate_limited");
  auto c = plainClient(o);
  auto e = EXPECT_ERROR(c.init());
  CHECK_EQ(e.code(), ErrorCode::rate_limited);
  CHECK_EQ(e.status(), 429);
  CHECK(e.retryAfter().has_value());
  CHECK(*e.retryAfter() > 0 && *e.retryAfter() <= 60);
}

KW_INTEGRATION(tamper, "tamper: forged, unsigned, replayed, foreign_nonce, unknown_kid, stale, bad_base64 are refused") {
  const std::vector<std::pair<std::string, std::string>> modes = {
      {"forged", "bad_signature"},        {"unsigned", "unsigned"},       {"replayed", "bad_signature"},
      {"foreign_nonce", "bad_signature"}, {"unknown_kid", "unknown_kid"}, {"stale", "stale"},
      {"bad_base64", "bad_base64"},
  };
  for (const auto& [mode, reason] : modes) {
    keywarden::Options o;
    o.baseUrl = tamperUrl(mode);
    auto c = plainClient(o);
    auto e = EXPECT_ERROR(c.init());
    CHECK_MSG(e.code() == ErrorCode::verification, mode + ": " + e.what());
    CHECK_MSG(e.reason() == reason, mode + ": expected " + reason + ", got " + e.reason());
    CHECK_MSG(c.session().empty(), mode);
    std::printf("     tamper: %s is refused (%s)\n", mode.c_str(), e.reason().c_str());
  }
}

KW_INTEGRATION(tamper_bad_proof, "tamper: bad_proof: the heartbeat token is not trusted") {
  keywarden::Options o;
  o.baseUrl = tamperUrl("bad_proof");
  auto c = plainClient(o);
  c.init();  // untouched by this mode
  c.activateLicense(takeKey("KW_KEYS_PLAIN"), kHwidA);
  auto e = EXPECT_ERROR(c.startHeartbeat("cpp-system-0006", "cpp-code-hash-0006"));
  CHECK_EQ(e.code(), ErrorCode::verification);
  CHECK_EQ(e.reason(), std::string("bad_proof"));
}

KW_INTEGRATION(signed_requests, "SIGNED app: signed requests are accepted; a wrong secret is refused (clock_skew)") {
  auto c = keywarden::Client::fromConfig(env("KW_CONFIG_SIGNED"));
  CHECK(c.config().apiSecret.has_value());
  CHECK_EQ(c.init().name, std::string("SDK SIGNED"));
  CHECK_EQ(c.activateLicense(takeKey("KW_KEYS_SIGNED"), kHwidA).level, 3);
  auto cfg = nlohmann::json::parse(kwtest::readFile(env("KW_CONFIG_SIGNED")));
  cfg["api_secret"] = "not-the-secret";
  auto wrong = keywarden::Client::fromConfig(cfg.dump());
  auto e = EXPECT_ERROR(wrong.init());
  CHECK_EQ(e.code(), ErrorCode::clock_skew);
  CHECK_EQ(e.status(), 401);
  // A plain app's config without the secret cannot talk to the SIGNED app.
  cfg.erase("api_secret");
  CHECK_EQ(EXPECT_ERROR(keywarden::Client::fromConfig(cfg.dump()).init()).status(), 401);
}

KW_INTEGRATION(encrypted, "SIGNED app with encKey: the server's AES-256-CBC answers are decrypted") {
  auto rec = std::make_shared<Recording>();
  keywarden::Options o;
  o.transport = rec;
  o.encKey = "cpp-enc-key-1";
  auto c = keywarden::Client::fromConfig(env("KW_CONFIG_SIGNED"), o);
  CHECK_EQ(c.init().name, std::string("SDK SIGNED"));
  auto lic = c.activateLicense(takeKey("KW_KEYS_SIGNED"), kHwidA);
  CHECK_EQ(lic.level, 3);
  CHECK(lic.expiresAt.has_value());
  auto log = rec->log();
  CHECK_EQ(log.size(), std::size_t{2});
  for (const auto& [path, res] : log) CHECK_MSG(res.body.rfind("{\"enc\":", 0) == 0, path + ": " + res.body.substr(0, 40));
}

KW_INTEGRATION(clock_off, "a client clock 7 minutes slow still works (signed): offset learned, one resend") {
  auto rec = std::make_shared<Recording>();
  keywarden::Options o;
  o.transport = rec;
  o.clock = [] { return std::chrono::system_clock::now() - std::chrono::seconds(420); };
  auto c = keywarden::Client::fromConfig(env("KW_CONFIG_SIGNED"), o);
  CHECK_EQ(c.init().name, std::string("SDK SIGNED"));
  CHECK(c.clockOffset()->count() > 415000 && c.clockOffset()->count() < 425000);
  auto log = rec->log();
  CHECK_EQ(log.size(), std::size_t{2});
  CHECK_EQ(log[0].second.status, 401);  // our timestamp was refused; the signed answer taught the offset
  CHECK_EQ(log[1].second.status, 200);
}
