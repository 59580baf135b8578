// sdk/vectors/airgap.json: activation requests this SDK writes, answers accepted only for the latest
// request's nonce, and seat pools accepted or refused for the reason each case names.
#include <algorithm>
#include <set>

#include "crypto.hpp"
#include "internal.hpp"
#include "runner.hpp"
#include "support.hpp"

namespace d = keywarden::detail;

namespace {
keywarden::TimePoint atUnix(const nlohmann::json& unixSeconds) { return d::timeFromMs(unixSeconds.get<std::int64_t>() * 1000); }

nlohmann::json decodeRequest(const std::string& r) {
  if (r.rfind("kwreq1.", 0) != 0 || r.find('=') != std::string::npos) return nullptr;
  auto raw = d::base64UrlDecode(r.substr(7));
  return raw ? nlohmann::json::parse(*raw, nullptr, false) : nlohmann::json();
}

std::vector<keywarden::ResponseKey> pinned(const nlohmann::json& v) {
  std::vector<keywarden::ResponseKey> keys;
  for (const auto& k : v["pinned_keys"]) keys.push_back({k["kid"], k["public_key"]});
  return keys;
}

void everyReason(const nlohmann::json& part, const std::set<std::string>& seen) {
  auto reasons = part["reasons"].get<std::vector<std::string>>();
  CHECK_EQ(seen.size(), reasons.size());
  for (const auto& r : reasons) CHECK_MSG(seen.count(r) == 1, r);
}
}  // namespace

KW_TEST(airgap_requests, "vectors/activation requests carry exactly the fields of each case") {
  auto v = kwtest::vectors("airgap.json");
  for (const auto& c : v["requests"]["cases"]) {
    std::map<std::string, std::string> components;
    if (c.contains("components")) components = c["components"].get<std::map<std::string, std::string>>();
    auto mine = keywarden::buildActivationRequest(c["app_id"], c["key"], c["hwid"], c["nonce"], c["created_at"], components);
    CHECK_MSG(decodeRequest(mine) == decodeRequest(c["request"].get<std::string>()), c["name"].get<std::string>());
    CHECK(decodeRequest(mine).is_object());
  }
}

KW_TEST(airgap_answers, "vectors/activation answers are accepted only for the latest request's nonce") {
  auto v = kwtest::vectors("airgap.json");
  auto keys = pinned(v);
  std::set<std::string> seen;
  for (const auto& c : v["responses"]["cases"]) {
    const std::string name = c["name"];
    std::optional<std::string> nonce;
    if (c["nonce"].is_string()) nonce = c["nonce"].get<std::string>();
    std::optional<keywarden::TimePoint> last;
    if (!c["last_seen"].is_null()) last = atUnix(c["last_seen"]);
    const auto run = [&] {
      keywarden::verifyLicenseFile(c["file"], keys, c["app_id"], c["hwid"], atUnix(c["now"]), last);
      keywarden::checkRequestNonce(c["file"], nonce);
    };
    if (c["valid"].get<bool>()) {
      try {
        run();
      } catch (const keywarden::Error& e) {
        CHECK_MSG(false, name + ": refused: " + e.what());
      }
    } else {
      auto e = EXPECT_ERROR(run());
      CHECK_EQ(e.code(), keywarden::ErrorCode::offline_invalid);
      CHECK_MSG(e.reason() == c["reason"].get<std::string>(), name + ": got " + e.reason());
      seen.insert(e.reason());
    }
  }
  everyReason(v["responses"], seen);
}

KW_TEST(airgap_pools, "vectors/seat pools are accepted or refused for the reason each case names") {
  auto v = kwtest::vectors("airgap.json");
  auto keys = pinned(v);
  std::set<std::string> seen;
  for (const auto& c : v["pools"]["cases"]) {
    const std::string name = c["name"];
    if (c["valid"].get<bool>()) {
      keywarden::SeatPool pool;
      try {
        pool = keywarden::verifyPool(c["pool"], keys, c["app_id"], atUnix(c["now"]));
      } catch (const keywarden::Error& e) {
        CHECK_MSG(false, name + ": refused: " + e.what());
      }
      const auto& p = c["payload"];
      CHECK_MSG(pool.licenseId == p["license_id"].get<std::string>() && pool.relayId == p["relay_id"].get<std::string>(), name);
      CHECK_MSG(pool.seats == p["seats"].get<std::int64_t>() && pool.level == p["level"].get<std::int64_t>(), name);
      auto ents = p["entitlements"].get<std::vector<std::string>>();
      std::sort(ents.begin(), ents.end());
      CHECK_MSG(pool.entitlements == ents, name);
      CHECK_MSG(pool.expiresAt.has_value() == p["expires_at"].is_string(), name);
    } else {
      auto e = EXPECT_ERROR(keywarden::verifyPool(c["pool"], keys, c["app_id"], atUnix(c["now"])));
      CHECK_EQ(e.code(), keywarden::ErrorCode::offline_invalid);
      CHECK_MSG(e.reason() == c["reason"].get<std::string>(), name + ": got " + e.reason());
      seen.insert(e.reason());
    }
  }
  everyReason(v["pools"], seen);
}
