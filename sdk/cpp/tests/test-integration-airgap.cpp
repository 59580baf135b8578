// Air-gapped machines end to end against the real server and real relay processes prepared by
// test/helpers/airgap-harness.ts: an activation request answered through the dashboard route and
// completed, an answer to an older request refused, and a seat leased from a relay, renewed (by hand and
// by its own thread), released, refused when every seat is taken, and refused when the relay serves a
// pool signed by another key.
#include <atomic>
#include <filesystem>
#include <random>
#include <sstream>
#include <thread>

#include "internal.hpp"
#include "runner.hpp"
#include "support.hpp"

using keywarden::ErrorCode;
using kwtest::env;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

nlohmann::json airgapCall(const std::string& method, const std::string& url, const std::string& body = {}, int* status = nullptr) {
  keywarden::HttpRequest r;
  r.method = method;
  r.url = url;
  if (!body.empty()) r.headers.emplace_back("Content-Type", "application/json");
  if (url.find("/api/") != std::string::npos) r.headers.emplace_back("Authorization", "Bearer " + env("KW_OWNER_TOKEN"));
  r.body = body;
  r.timeout = 60s;
  auto res = keywarden::makeCurlTransport()->send(r);
  if (status) *status = res.status;
  return nlohmann::json::parse(res.body, nullptr, false);
}

void requireAirgap() {
  if (!env("KW_AIRGAP_ERROR").empty()) throw kwtest::Failure{"the harness could not prepare the relays: " + env("KW_AIRGAP_ERROR")};
  if (env("KW_AIRGAP_RELAY_URL").empty()) {
    if (env("KW_REQUIRE_AIRGAP") == "1") throw kwtest::Failure{"KW_REQUIRE_AIRGAP=1 but the server has no offline-activations route"};
    kwtest::skip("air-gapped pending: the server has no /api/apps/{id}/offline-activations");
  }
}

/** The operator's side: the dashboard route answers the request. */
std::string answer(const std::string& request) {
  int status = 0;
  auto r = airgapCall("POST", env("KW_BASE_URL") + "/api/apps/" + env("KW_AIRGAP_APP_ID") + "/offline-activations",
                      nlohmann::json({{"request", request}}).dump(), &status);
  if (status != 200) throw kwtest::Failure{"offline-activations answered " + std::to_string(status) + " " + r.dump()};
  return r["response"].get<std::string>();
}

std::int64_t inUse() { return airgapCall("GET", env("KW_AIRGAP_RELAY_URL") + "/relay/v1/status")["in_use"].get<std::int64_t>(); }

std::string airgapKey() {
  static std::atomic<std::size_t> next{0};
  std::vector<std::string> all;
  std::stringstream ss(env("KW_AIRGAP_KEYS"));
  for (std::string k; std::getline(ss, k, ',');) all.push_back(k);
  std::size_t i = next++;
  if (i >= all.size()) throw kwtest::Failure{"out of KW_AIRGAP_KEYS"};
  return all[i];
}

struct AirgapDir {
  fs::path path = fs::temp_directory_path() / ("kw-cpp-airgap-" + std::to_string(std::random_device{}() % 1000000000u));
  AirgapDir() { fs::create_directories(path); }
  ~AirgapDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  keywarden::Client client(const char* name, keywarden::Options o = {}) const {
    o.stateFile = (path / (std::string(name) + ".json")).string();
    return keywarden::Client::fromConfig(env("KW_AIRGAP_CONFIG"), std::move(o));
  }
};

}  // namespace

KW_INTEGRATION(airgap_request, "airgap: a request answered through the dashboard completes; a later start loads the answer") {
  requireAirgap();
  AirgapDir dir;
  auto c = dir.client("req-a");
  const std::string hwid = "cpp-airgap-machine-a";
  const std::string req = c.activationRequest(airgapKey(), hwid, {{"cpu", "c1"}, {"disk", "d1"}});
  CHECK(req.rfind("kwreq1.", 0) == 0);
  CHECK(fs::exists(c.requestFile()));
  const std::string response = answer(req);
  auto lic = c.completeActivation(response, hwid);
  CHECK(lic.appId == env("KW_AIRGAP_APP_ID") && lic.hwid == hwid && lic.level == 3);
  CHECK(dir.client("req-a").loadOffline(response, hwid).licenseId == lic.licenseId);
}

KW_INTEGRATION(airgap_older, "airgap: an answer to an older request is wrong_request; another machine's is wrong_hwid") {
  requireAirgap();
  AirgapDir dir;
  auto c = dir.client("req-b");
  const std::string hwid = "cpp-airgap-machine-b";
  const std::string key = airgapKey();
  const std::string old = answer(c.activationRequest(key, hwid));
  (void)c.activationRequest(key, hwid);
  auto e = EXPECT_ERROR(c.completeActivation(old, hwid));
  CHECK_EQ(e.code(), ErrorCode::offline_invalid);
  CHECK_MSG(e.reason() == "wrong_request", e.reason());
  auto other = dir.client("req-b-other");
  const std::string foreign = answer(other.activationRequest(airgapKey(), "cpp-airgap-other"));
  auto e2 = EXPECT_ERROR(other.completeActivation(foreign, hwid));
  CHECK_MSG(e2.reason() == "wrong_hwid", e2.reason());
}

KW_INTEGRATION(airgap_lease, "airgap: a seat is leased, renewed and released at the relay") {
  requireAirgap();
  AirgapDir dir;
  auto c = dir.client("relay-a");
  const auto before = inUse();
  {
    auto lease = c.leaseSeat(env("KW_AIRGAP_RELAY_URL"), "cpp-relay-a");
    CHECK(lease.active());
    CHECK(lease.pool().appId == env("KW_AIRGAP_APP_ID"));
    CHECK_EQ(lease.pool().seats, std::stoll(env("KW_AIRGAP_SEATS")));
    CHECK_EQ(inUse(), before + 1);
    const auto first = lease.expiresAt();
    std::this_thread::sleep_for(1100ms);
    lease.renew();
    CHECK(lease.expiresAt() > first);
    CHECK_EQ(lease.renewals(), 1);
    lease.release();
    CHECK(!lease.active());
  }
  CHECK_EQ(inUse(), before);
}

KW_INTEGRATION(airgap_autorenew, "airgap: the lease renews itself before it expires") {
  requireAirgap();
  AirgapDir dir;
  keywarden::Options o;
  // The client's clock runs 14 min 50 s ahead: the 15-minute lease has 10 s left, renewed at half that.
  o.clock = [] { return std::chrono::system_clock::now() + 890s; };
  auto c = dir.client("relay-b", o);
  auto lease = c.leaseSeat(env("KW_AIRGAP_RELAY_URL"), "cpp-relay-b");
  for (int i = 0; i < 300 && lease.renewals() == 0; i++) std::this_thread::sleep_for(200ms);
  CHECK_MSG(lease.renewals() >= 1, "renewed by its own thread");
  CHECK(!lease.lost().has_value());
}

KW_INTEGRATION(airgap_exhausted, "airgap: every seat taken is session_limit until one is released") {
  requireAirgap();
  AirgapDir dir;
  auto c = dir.client("relay-c");
  const auto seats = std::stoll(env("KW_AIRGAP_SEATS"));
  std::vector<keywarden::SeatLease> held;
  for (long long i = 0; i < seats; i++) held.push_back(c.leaseSeat(env("KW_AIRGAP_RELAY_URL"), "cpp-relay-seat-" + std::to_string(i)));
  auto e = EXPECT_ERROR(c.leaseSeat(env("KW_AIRGAP_RELAY_URL"), "cpp-relay-one-too-many"));
  CHECK_EQ(e.code(), ErrorCode::session_limit);
  CHECK_EQ(e.status(), 409);
  held.back().release();
  held.push_back(c.leaseSeat(env("KW_AIRGAP_RELAY_URL"), "cpp-relay-one-too-many"));
}

KW_INTEGRATION(airgap_forged, "airgap: a relay serving a pool signed by another key is refused (bad_signature)") {
  requireAirgap();
  AirgapDir dir;
  auto c = dir.client("relay-d");
  auto e = EXPECT_ERROR(c.leaseSeat(env("KW_AIRGAP_FORGED_RELAY_URL"), "cpp-relay-forged"));
  CHECK_EQ(e.code(), ErrorCode::offline_invalid);
  CHECK_MSG(e.reason() == "bad_signature", e.reason());
  CHECK(c.entitlements().empty());
}
