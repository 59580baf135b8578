// Offline license files (docs/protocol.md 12.5) and the clock record that guards them.
//
// FILE = "kwlic1." base64url(PAYLOAD) "." base64url(Ed25519("kwlic1." base64url(PAYLOAD))), signed by
// one of the response-signing keys this SDK pins. Accepted only when, in this order (shared by every
// SDK and fixed by sdk/vectors/offline.json):
//   1. it has that shape and PAYLOAD is the JSON object 12.5 describes   (else malformed)
//   2. its kid is pinned                                                 (unknown_kid)
//   3. the signature verifies                                            (bad_signature)
//   4. app_id is this application's                                     (wrong_app)
//   5. hwid is this machine's (compared lower-cased)                     (wrong_hwid)
//   6. the clock is not more than 300 s below the latest time seen       (clock_rolled_back)
//   7. issued_at is at most 300 s ahead of the clock                     (issued_in_future)
//   8. the clock is before valid_until                                   (expired)
// Every check records its clock reading in the state file (never lowering it). Deleting the file
// forgets the record: like anything on an end user's machine it is a speed bump, which is why files
// carry a bounded valid_until.
#include "offline.hpp"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <system_error>
#include <filesystem>

#include "crypto.hpp"

namespace keywarden {

namespace detail {

/** base64url without padding, strictly; nullopt otherwise. */
std::optional<std::string> fromB64Url(const std::string& part) {
  if (part.empty() || part.size() % 4 == 1) return std::nullopt;
  for (char c : part)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) return std::nullopt;
  return detail::base64UrlDecode(part);
}

bool text(const nlohmann::json& p, const char* name) {
  auto it = p.find(name);
  return it != p.end() && it->is_string() && !it->get<std::string>().empty();
}

bool utc(const nlohmann::json& p, const char* name, bool nullable) {
  auto it = p.find(name);
  if (it == p.end()) return false;
  if (it->is_null()) return nullable;
  return it->is_string() && detail::parseUtcMs(it->get<std::string>()).has_value();
}

Signed openSigned(const std::string& text, const std::string& tag) {
  const auto refuseMalformed = [](const std::string& what) {
    throw Error(ErrorCode::offline_invalid, "offline license refused (malformed): " + what).withReason("malformed");
  };
  // Only space, tab, CR and LF are trimmed (sdk/vectors/README.md).
  const std::size_t b = text.find_first_not_of(" \t\r\n");
  const std::string f = b == std::string::npos ? std::string() : text.substr(b, text.find_last_not_of(" \t\r\n") - b + 1);
  std::vector<std::string> parts;
  std::stringstream ss(f);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  if (!f.empty() && f.back() == '.') parts.push_back("");
  if (parts.size() != 3 || parts[0] != tag) refuseMalformed("not \"" + tag + ".<payload>.<signature>\"");
  auto raw = fromB64Url(parts[1]);
  auto sig = fromB64Url(parts[2]);
  if (!raw || !sig || sig->size() != 64) refuseMalformed("payload or signature is not base64url (a signature is 64 bytes)");
  // nlohmann::json refuses ill-formed UTF-8 in strings, so a payload that is not UTF-8 fails here too.
  nlohmann::json p = nlohmann::json::parse(*raw, nullptr, false);
  if (p.is_discarded() || !p.is_object()) refuseMalformed("payload is not a UTF-8 JSON object");
  return Signed{tag + "." + parts[1], *sig, std::move(p)};
}

bool grantFieldsOk(const nlohmann::json& p) {
  const auto integer = [&](const char* n) { return p.contains(n) && p[n].is_number_integer(); };
  return integer("v") && p["v"].get<std::int64_t>() == 1 && integer("level") && p.contains("entitlements") &&
         p["entitlements"].is_array() &&
         std::all_of(p["entitlements"].begin(), p["entitlements"].end(), [](const nlohmann::json& e) { return e.is_string(); }) &&
         utc(p, "expires_at", true) && utc(p, "issued_at", false) && utc(p, "valid_until", false);
}

}  // namespace detail

namespace {

constexpr std::int64_t kMaxFutureMs = 300 * 1000;
constexpr std::int64_t kMaxRollbackMs = 300 * 1000;

[[noreturn]] void refuse(const std::string& reason, const std::string& what) {
  throw Error(ErrorCode::offline_invalid, "offline license refused (" + reason + "): " + what).withReason(reason);
}

}  // namespace

OfflineLicense verifyLicenseFile(const std::string& file, const std::vector<ResponseKey>& keys, const std::string& appId,
                                 const std::string& hwid, TimePoint now, std::optional<TimePoint> lastSeen) {
  detail::ensureSodium();
  detail::Signed env = detail::openSigned(file, "kwlic1");
  const nlohmann::json& p = env.payload;
  bool good = detail::grantFieldsOk(p) && detail::text(p, "kid") && detail::text(p, "app_id") && detail::text(p, "license_id") &&
              detail::text(p, "hwid") && p.contains("user") && (p["user"].is_null() || p["user"].is_string());
  if (!good) refuse("malformed", "payload lacks a field of docs/protocol.md 12.5 or has one of the wrong type");
  const std::string kid = p["kid"].get<std::string>();
  auto key = std::find_if(keys.begin(), keys.end(), [&](const ResponseKey& k) { return k.kid == kid; });
  if (key == keys.end()) refuse("unknown_kid", "signed under key " + kid + ", which this SDK does not pin");
  auto pk = detail::base64Decode(key->publicKey);
  if (!pk || !detail::ed25519Verify(*pk, env.signedText, env.signature)) refuse("bad_signature", "the signature does not verify");
  if (p["app_id"].get<std::string>() != appId) refuse("wrong_app", "issued for application " + p["app_id"].get<std::string>());
  if (p["hwid"].get<std::string>() != detail::lowerAscii(hwid)) refuse("wrong_hwid", "issued for another machine");
  const std::int64_t nowMs = detail::msOf(now);
  if (lastSeen && nowMs < detail::msOf(*lastSeen) - kMaxRollbackMs)
    refuse("clock_rolled_back", "the clock reads " + std::to_string((detail::msOf(*lastSeen) - nowMs) / 1000) + " s before a time already seen");
  const std::int64_t issued = *detail::parseUtcMs(p["issued_at"].get<std::string>());
  const std::int64_t until = *detail::parseUtcMs(p["valid_until"].get<std::string>());
  if (issued > nowMs + kMaxFutureMs) refuse("issued_in_future", "issued " + std::to_string((issued - nowMs) / 1000) + " s ahead of the clock");
  if (nowMs >= until) refuse("expired", "valid until " + p["valid_until"].get<std::string>());
  OfflineLicense lic;
  lic.appId = p["app_id"].get<std::string>();
  lic.licenseId = p["license_id"].get<std::string>();
  if (p["user"].is_string()) lic.user = p["user"].get<std::string>();
  lic.hwid = p["hwid"].get<std::string>();
  lic.level = p["level"].get<std::int64_t>();
  for (const auto& e : p["entitlements"]) lic.entitlements.push_back(e.get<std::string>());
  std::sort(lic.entitlements.begin(), lic.entitlements.end());
  lic.entitlements.erase(std::unique(lic.entitlements.begin(), lic.entitlements.end()), lic.entitlements.end());
  if (p["expires_at"].is_string()) lic.expiresAt = detail::timeFromMs(*detail::parseUtcMs(p["expires_at"].get<std::string>()));
  lic.issuedAt = detail::timeFromMs(issued);
  lic.validUntil = detail::timeFromMs(until);
  lic.kid = kid;
  return lic;
}

std::string defaultStateFile(const std::string& apiKey) {
  namespace fs = std::filesystem;
  const std::string name = detail::sha256Hex(apiKey).substr(0, 16) + ".json";
  auto envOr = [](const char* var) {
    const char* v = std::getenv(var);
    return v ? std::string(v) : std::string();
  };
#if defined(_WIN32)
  std::string base = envOr("LOCALAPPDATA");
  if (base.empty()) base = (fs::path(envOr("USERPROFILE")) / "AppData" / "Local").string();
  return (fs::path(base) / "Keywarden" / name).string();
#elif defined(__APPLE__)
  return (fs::path(envOr("HOME")) / "Library" / "Application Support" / "Keywarden" / name).string();
#else
  std::string base = envOr("XDG_STATE_HOME");
  if (base.empty()) base = (fs::path(envOr("HOME")) / ".local" / "state").string();
  return (fs::path(base) / "keywarden" / name).string();
#endif
}

namespace detail {

std::optional<TimePoint> ClockRecord::lastSeen() const {
  std::ifstream in(file_, std::ios::binary);
  if (!in) return std::nullopt;  // no record yet (or unreadable: then recording fails loudly)
  std::ostringstream ss;
  ss << in.rdbuf();
  nlohmann::json v = nlohmann::json::parse(ss.str(), nullptr, false);
  if (v.is_discarded() || !v.is_object() || !v.contains("last_seen") || !v["last_seen"].is_number() ||
      !(std::abs(v["last_seen"].get<double>()) < 1e12)) {
    if (warn_) warn_("keywarden.offline.state_unreadable", file_ + ": no last_seen");
    return std::nullopt;
  }
  return timeFromMs(static_cast<std::int64_t>(v["last_seen"].get<double>() * 1000));
}

void ClockRecord::record(TimePoint now) {
  namespace fs = std::filesystem;
  std::lock_guard<std::mutex> lk(mu_);
  auto seen = lastSeen();
  if (seen && *seen >= now) return;
  const fs::path path(file_);
  const fs::path tmp = path.parent_path() / (".kwstate-" + randomToken(6));
  std::error_code ec;
  if (!path.parent_path().empty()) fs::create_directories(path.parent_path(), ec);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (out) out << nlohmann::json({{"v", 1}, {"last_seen", msOf(now) / 1000}}).dump();
    if (!out) ec = std::make_error_code(std::errc::io_error);
  }
  if (!ec) fs::rename(tmp, path, ec);  // replaces the old file atomically (POSIX rename, MoveFileEx on Windows)
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    if (warn_) warn_("keywarden.offline.state_unwritable", file_ + ": " + ec.message());
  }
}

}  // namespace detail
}  // namespace keywarden
