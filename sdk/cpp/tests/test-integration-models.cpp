// docs/protocol.md 12 (licensing models) end to end against real servers prepared by test/helpers/sdk-harness.ts
// and test/helpers/models-harness.ts: a trial once per device, an offline license file from the server
// checked without it, and the grace period across a real restart of the server, inside the window and
// past it. Pending server side: while the server answers 404 for /api/client/trial these tests are
// skipped ("licensing models pending"); KW_REQUIRE_MODELS=1 makes that a failure.
#include <atomic>
#include <cctype>
#include <filesystem>
#include <random>
#include <sstream>

#include "heartbeat-events.hpp"
#include "internal.hpp"
#include "runner.hpp"
#include "support.hpp"

using keywarden::ErrorCode;
using kwtest::env;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

int postJson(const std::string& url, const std::string& body = "{}", const std::string& from = {}) {
  keywarden::HttpRequest r;
  r.method = "POST";
  r.url = url;
  r.headers = {{"Content-Type", "application/json"}};
  if (!from.empty()) r.headers.emplace_back("X-Forwarded-For", from);
  r.body = body;
  r.timeout = 120s;
  return keywarden::makeCurlTransport()->send(r).status;
}

/** Skips while the server has no licensing models; fails with KW_REQUIRE_MODELS=1 or a broken MODELS app. */
void requireModels() {
  // From its own address (X-Forwarded-For; the harness trusts 127.0.0.1): trial shares license's rate-limit bucket.
  const std::string from = env("KW_MODELS_PROBE_ADDRESS").empty() ? "198.51.100.212" : env("KW_MODELS_PROBE_ADDRESS");
  static const bool pending = postJson(env("KW_BASE_URL") + "/api/client/trial", "{}", from) == 404;
  if (pending) {
    if (env("KW_REQUIRE_MODELS") == "1") throw kwtest::Failure{"KW_REQUIRE_MODELS=1 but the server answers 404 for /api/client/trial"};
    kwtest::skip("licensing models pending: the server answers 404 for /api/client/trial");
  }
  if (!env("KW_MODELS_ERROR").empty()) throw kwtest::Failure{"the harness could not prepare app MODELS: " + env("KW_MODELS_ERROR")};
}

void modelsControl(const std::string& action, const std::string& body = "{}") {
  int status = postJson(env("KW_MODELS_CONTROL_URL") + "/" + action, body);
  if (status != 200) throw kwtest::Failure{"models control " + action + " answered " + std::to_string(status)};
}

std::int64_t modelsSetting(const char* name) { return nlohmann::json::parse(env("KW_MODELS_SETTINGS"))[name].get<std::int64_t>(); }

std::string modelsKey() {
  static std::atomic<std::size_t> next{0};
  std::vector<std::string> all;
  std::stringstream ss(env("KW_KEYS_MODELS"));
  for (std::string k; std::getline(ss, k, ',');) all.push_back(k);
  std::size_t i = next++;
  if (i >= all.size()) throw kwtest::Failure{"out of KW_KEYS_MODELS"};
  return all[i];
}

std::string uniqueHwid(const char* what) {
  std::random_device rd;
  return std::string("sdk-cpp-") + what + "-" + std::to_string(rd() % 1000000000u);
}

struct ModelsDir {
  fs::path path = fs::temp_directory_path() / uniqueHwid("models-it");
  ModelsDir() { fs::create_directories(path); }
  ~ModelsDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

keywarden::Client modelsClient(const ModelsDir& dir, const char* state, keywarden::Options o = {}) {
  o.stateFile = (dir.path / state).string();
  return keywarden::Client::fromConfig(env("KW_CONFIG_MODELS"), std::move(o));
}

std::int64_t nowUnix() { return kwtest::unixSeconds(std::chrono::system_clock::now()); }

}  // namespace

KW_INTEGRATION(models_trial, "models: a trial once per device; MODELS OFF offers none") {
  requireModels();
  ModelsDir dir;
  const std::string id = uniqueHwid("trial");
  auto c = modelsClient(dir, "a.json");
  c.init();
  auto t = c.trial(id);
  CHECK_MSG(t.key.rfind("TRIAL-", 0) == 0 && t.key.size() == 20, t.key);
  CHECK_EQ(static_cast<std::int64_t>(t.level), modelsSetting("trial_level"));
  CHECK(t.expiresAt && std::llabs(kwtest::unixSeconds(*t.expiresAt) - nowUnix() - modelsSetting("trial_hours") * 3600) < 180);
  CHECK(t.entitlements.empty());
  keywarden::HeartbeatOptions ho;
  ho.channel = false;
  ho.debuggerDetected = [] { return false; };
  auto hb = c.startHeartbeat(id, "abcdef0123456789", ho);
  CHECK(hb.state() == keywarden::HeartbeatState::healthy);
  hb.stop();
  auto again = modelsClient(dir, "b.json");
  again.init();
  std::string upper = id;
  for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  auto e = EXPECT_ERROR(again.trial(upper));  // the same device: HWIDs are compared lower-cased
  CHECK_EQ(e.code(), ErrorCode::trial_used);
  CHECK_EQ(e.status(), 403);
  CHECK(again.trial(id + "-b").key.rfind("TRIAL-", 0) == 0);
  auto off = keywarden::Client::fromConfig(env("KW_CONFIG_MODELS_OFF"));
  off.init();
  CHECK_EQ(EXPECT_ERROR(off.trial(id)).code(), ErrorCode::trial_disabled);
}

KW_INTEGRATION(models_offline, "models: an offline license file round trip, checked without the server") {
  requireModels();
  ModelsDir dir;
  const std::string id = uniqueHwid("offline");
  auto c = modelsClient(dir, "a.json");
  c.init();
  auto lic = c.activateLicense(modelsKey(), id);
  CHECK_EQ(lic.entitlements.size(), 2u);
  CHECK(c.hasEntitlement("export") && c.hasEntitlement("pro"));
  std::string file = c.offlineFile(id);
  struct NoNetwork : keywarden::Transport {
    keywarden::HttpResponse send(const keywarden::HttpRequest&) override { throw std::runtime_error("no call expected"); }
  };
  keywarden::Options o;
  o.transport = std::make_shared<NoNetwork>();
  auto offline = modelsClient(dir, "b.json", o);
  auto ol = offline.loadOffline(file, id);
  CHECK_EQ(ol.appId, env("KW_MODELS_APP_ID"));
  CHECK_EQ(ol.hwid, id);
  CHECK_EQ(ol.level, 3);
  CHECK_EQ(ol.entitlements.size(), 2u);
  CHECK(!ol.user);
  CHECK(std::llabs(kwtest::unixSeconds(ol.validUntil) - kwtest::unixSeconds(ol.issuedAt) - modelsSetting("offline_days") * 86400) <= 1);
  CHECK(offline.hasEntitlement("pro"));
  CHECK_EQ(EXPECT_ERROR(offline.loadOffline(file, id + "-other")).reason(), std::string("wrong_hwid"));
  keywarden::Options late;
  late.clock = [] { return std::chrono::system_clock::now() + std::chrono::hours(8 * 24); };
  CHECK_EQ(EXPECT_ERROR(modelsClient(dir, "c.json", late).loadOffline(file, id)).reason(), std::string("expired"));
  CHECK_EQ(EXPECT_ERROR(c.offlineFile(id + "-other")).code(), ErrorCode::hwid_mismatch);
  // MODELS OFF issues none (docs/protocol.md 12.5 lists "off" before "session not activated").
  auto off = keywarden::Client::fromConfig(env("KW_CONFIG_MODELS_OFF"));
  off.init();
  CHECK_EQ(EXPECT_ERROR(off.offlineFile(id)).code(), ErrorCode::offline_disabled);
}

KW_INTEGRATION(models_grace, "models: grace across a real server restart, inside the window and past it; a ban ends it") {
  requireModels();
  ModelsDir dir;
  const std::string id = uniqueHwid("grace");
  const std::string key = modelsKey();
  auto shift = std::make_shared<std::atomic<std::int64_t>>(0);
  keywarden::Options o;
  o.clock = [shift] { return std::chrono::system_clock::now() + std::chrono::milliseconds(shift->load()); };
  auto c = modelsClient(dir, "a.json", o);
  c.init();
  c.activateLicense(key, id);
  const std::int64_t grace = modelsSetting("grace_hours") * 3600;
  CHECK(c.graceUntil() && std::llabs(kwtest::unixSeconds(*c.graceUntil()) - nowUnix() - grace) < 120);
  kwtest::HeartbeatEvents ev;
  auto ho = ev.options(500ms);
  ho.reauth = true;
  std::atomic<int> offline{0}, expired{0};
  ho.onOffline = [&](const keywarden::OfflineEvent&) {
    ++offline;
    ev.add("offline " + std::to_string(offline.load()));
  };
  ho.onGraceExpired = [&](const keywarden::GraceExpiredEvent&) {
    ++expired;
    ev.add("grace_expired");
  };
  auto hb = c.startHeartbeat(id, "abcdef0123456789", ho);
  struct Restore {
    std::shared_ptr<std::atomic<std::int64_t>> shift;
    ~Restore() {
      *shift = 0;
      try {
        modelsControl("up");
      } catch (...) {
      }
    }
  } restore{shift};
  CHECK(hb.waitForBeats(1, 30s));
  // Inside the window: down and back; the license stays valid throughout.
  modelsControl("down");
  CHECK(ev.waitFor("offline 1", 60s));
  CHECK(hb.state() == keywarden::HeartbeatState::offline);
  CHECK(c.graceActive());
  std::int64_t beats = 0;
  for (const auto& l : ev.snapshot()) beats += l.rfind("beat ", 0) == 0 ? 1 : 0;
  modelsControl("up");
  CHECK(hb.waitForBeats(beats + 1, 90s));
  CHECK(hb.state() == keywarden::HeartbeatState::healthy);
  CHECK(c.graceActive());
  // Past the window: down again, and the clock passes grace_until before the server is back.
  modelsControl("down");
  CHECK(ev.waitFor("offline 2", 60s));
  *shift = (grace + 3600) * 1000;
  CHECK(ev.waitFor("grace_expired", 60s));
  CHECK(!c.graceActive());
  CHECK(hb.state() == keywarden::HeartbeatState::degraded);
  *shift = 0;
  beats = 0;
  for (const auto& l : ev.snapshot()) beats += l.rfind("beat ", 0) == 0 ? 1 : 0;
  modelsControl("up");
  CHECK(hb.waitForBeats(beats + 1, 90s));
  CHECK(c.graceActive());
  // A verified refusal ends the grace at once.
  modelsControl("ban", nlohmann::json({{"key", key}}).dump());
  CHECK(ev.waitFor("killed", 60s));
  CHECK(!c.graceUntil());
  hb.stop();
}
