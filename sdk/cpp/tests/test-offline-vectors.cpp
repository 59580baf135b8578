// sdk/vectors/offline.json: offline license files (docs/protocol.md 12.5) accepted or refused for the reason
// each case names, and what a grace_until value grants (12.6).
#include <algorithm>
#include <cmath>
#include <set>

#include "internal.hpp"
#include "runner.hpp"
#include "support.hpp"

namespace d = keywarden::detail;

namespace {
keywarden::TimePoint at(const nlohmann::json& unixSeconds) {
  return d::timeFromMs(static_cast<std::int64_t>(std::llround(unixSeconds.get<double>() * 1000)));
}
}  // namespace

KW_TEST(offline_vectors, "vectors/offline files are accepted or refused for the reason each case names") {
  auto v = kwtest::vectors("offline.json");
  CHECK_EQ(v["max_future_seconds"].get<int>(), 300);
  CHECK_EQ(v["max_rollback_seconds"].get<int>(), 300);
  std::vector<keywarden::ResponseKey> keys;
  for (const auto& k : v["pinned_keys"]) keys.push_back({k["kid"], k["public_key"]});
  std::set<std::string> seen;
  for (const auto& c : v["cases"]) {
    const std::string name = c["name"];
    std::optional<keywarden::TimePoint> last;
    if (!c["last_seen"].is_null()) last = at(c["last_seen"]);
    if (c["valid"].get<bool>()) {
      keywarden::OfflineLicense lic;
      try {
        lic = keywarden::verifyLicenseFile(c["file"], keys, c["app_id"], c["hwid"], at(c["now"]), last);
      } catch (const keywarden::Error& e) {
        CHECK_MSG(false, name + ": refused: " + e.what());
      }
      const auto& p = c["payload"];
      CHECK_MSG(lic.appId == p["app_id"].get<std::string>() && lic.licenseId == p["license_id"].get<std::string>(), name);
      CHECK_MSG(lic.user.has_value() == p["user"].is_string(), name);
      CHECK_MSG(lic.hwid == p["hwid"].get<std::string>() && lic.level == p["level"].get<std::int64_t>() && lic.kid == p["kid"].get<std::string>(), name);
      auto ents = p["entitlements"].get<std::vector<std::string>>();
      std::sort(ents.begin(), ents.end());
      CHECK_MSG(lic.entitlements == ents, name);
      CHECK_MSG(d::msOf(lic.validUntil) == *d::parseUtcMs(p["valid_until"].get<std::string>()), name);
      CHECK_MSG(lic.expiresAt.has_value() == p["expires_at"].is_string(), name);
    } else {
      auto e = EXPECT_ERROR(keywarden::verifyLicenseFile(c["file"], keys, c["app_id"], c["hwid"], at(c["now"]), last));
      CHECK_EQ(e.code(), keywarden::ErrorCode::offline_invalid);
      CHECK_MSG(e.reason() == c["reason"].get<std::string>(), name + ": got " + e.reason());
      seen.insert(e.reason());
    }
  }
  auto reasons = v["reasons"].get<std::vector<std::string>>();
  CHECK_EQ(seen.size(), reasons.size());
  for (const auto& r : reasons) CHECK_MSG(seen.count(r) == 1, r);
}

KW_TEST(grace_vectors, "vectors/what each grace_until grants") {
  auto v = kwtest::vectors("offline.json");
  for (const auto& c : v["grace"]["cases"]) {
    const std::string name = c["name"];
    std::optional<std::int64_t> until;
    if (c.contains("grace_until") && c["grace_until"].is_string()) until = d::parseUtcMs(c["grace_until"].get<std::string>());
    if (c["until"].is_null()) {
      CHECK_MSG(!until, name);
    } else {
      CHECK_MSG(until && *until == std::llround(c["until"].get<double>() * 1000), name);
    }
    CHECK_MSG((until && d::msOf(at(c["now"])) < *until) == c["active"].get<bool>(), name);
  }
}
