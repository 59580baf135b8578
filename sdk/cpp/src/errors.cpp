// The error codes and this SDK's copy of the error table (sdk/vectors/errors.json, generated from
// the server's src/errors.ts). tests/test_errors.cpp fails when the two differ: update both together.
#include <cstdlib>

#include "internal.hpp"

namespace keywarden {

namespace {
const char* const kCodeNames[] = {
    "invalid_key",  "key_used",     "banned",           "expired",      "hwid_mismatch", "app_disabled",
    "update_required", "rate_limited", "locked_out",    "session_expired", "heartbeat_killed", "verification",
    "clock_skew",   "network",      "timeout",          "server",
    // docs/protocol.md 12 (licensing models).
    "trial_disabled", "trial_used", "offline_disabled", "offline_invalid", "session_limit",
};
constexpr int kCodeCount = static_cast<int>(sizeof kCodeNames / sizeof kCodeNames[0]);
}  // namespace

const char* to_string(ErrorCode code) noexcept {
  int i = static_cast<int>(code);
  return i >= 0 && i < kCodeCount ? kCodeNames[i] : "server";
}

std::optional<ErrorCode> errorCodeFromString(const std::string& name) noexcept {
  for (int i = 0; i < kCodeCount; ++i)
    if (name == kCodeNames[i]) return static_cast<ErrorCode>(i);
  return std::nullopt;
}

Error::Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}

const std::vector<ErrorTableEntry>& errorTable() {
  using C = ErrorCode;
  static const std::vector<ErrorTableEntry> table = {
      {413, "Payload too large", C::server},
      {400, "Malformed JSON body", C::server},
      {429, "Rate limit exceeded", C::rate_limited},
      {404, "Not found", C::server},
      {405, "Method not allowed", C::server},
      {500, "Internal server error", C::server},
      {503, "Service unavailable", C::server},
      {404, "Application not found", C::app_disabled},
      {401, "Invalid or expired session", C::session_expired},
      {401, "Invalid request signature", C::clock_skew},
      {403, "Access denied", C::banned},
      {403, "Application disabled", C::app_disabled},
      {429, "Too many failed attempts, try again later.", C::locked_out},
      {426, "A new version is required.", C::update_required},
      {400, "Encryption key required", C::server},
      {403, "Binary hash mismatch", C::server},
      {403, "Invalid binary token", C::server},
      {400, "Invalid license key", C::invalid_key},
      {400, "License key already used", C::key_used},
      {400, "Username already taken", C::server},
      {403, "License key is banned", C::banned},
      {403, "License validation is temporarily paused for this application.", C::app_disabled},
      {403, "Access is temporarily paused for this application.", C::app_disabled},
      {403, "Heartbeat session required. Call /heartbeat/start first.", C::server},
      {409, "License state changed mid-activation, please retry", C::server},
      {409, "License activation in progress, retry.", C::server},
      {401, "Invalid username or password", C::invalid_key},
      {403, "License not valid", C::invalid_key},
      {403, "HWID mismatch. Key locked to another device.", C::hwid_mismatch},
      {403, "License expired", C::expired},
      {403, "Session not activated. Call /login, /register or /license first.", C::session_expired},
      {409, "heartbeat session already exists for this nonce", C::server},
      {403, "rejected", C::heartbeat_killed},
      {401, "Invalid heartbeat token", C::heartbeat_killed},
      // docs/protocol.md 12 (licensing models).
      {403, "Trials are not enabled for this application.", C::trial_disabled},
      {403, "Trial already used on this device.", C::trial_used},
      {403, "Offline licenses are not enabled for this application.", C::offline_disabled},
      {409, "Concurrent session limit reached", C::session_limit},
      // A download link (update downloads report these as UpdateError download_failed).
      {403, "Download link expired", C::server},
      {416, "Range not satisfiable", C::server},
  };
  return table;
}

const std::map<int, ErrorCode>& errorStatusFallbacks() {
  // Data-driven details: an app's disabled_message, the 426 object, any other 429.
  static const std::map<int, ErrorCode> m = {
      {403, ErrorCode::app_disabled}, {426, ErrorCode::update_required}, {429, ErrorCode::rate_limited}};
  return m;
}

ErrorCode codeFor(int status, const std::string* detail) {
  if (detail)
    for (const auto& e : errorTable())
      if (e.status == status && *detail == e.detail) return e.code;
  const auto& fb = errorStatusFallbacks();
  auto it = fb.find(status);
  return it != fb.end() ? it->second : ErrorCode::server;
}

namespace detail {

Error verificationError(const std::string& reason, const std::string& what) {
  Error e(ErrorCode::verification, "response refused (" + reason + "): " + what);
  e.withReason(reason);
  return e;
}

Error errorFromAnswer(int status, const nlohmann::json& detail, const std::string* retryAfterHeader) {
  const std::string* text = detail.is_string() ? &detail.get_ref<const std::string&>() : nullptr;
  ErrorCode code = codeFor(status, text);
  std::string shown = text ? *text : detail.dump();
  std::string latest, url;
  if (code == ErrorCode::update_required && detail.is_object()) {
    if (auto it = detail.find("latest_version"); it != detail.end() && it->is_string()) latest = it->get<std::string>();
    if (auto it = detail.find("update_url"); it != detail.end() && it->is_string()) url = it->get<std::string>();
    if (auto it = detail.find("message"); it != detail.end() && it->is_string()) shown = it->get<std::string>();
  }
  Error e(code, std::string(to_string(code)) + ": " + std::to_string(status) + " " + shown);
  e.withStatus(status).withDetailJson(detail.dump());
  if (!latest.empty() || !url.empty()) e.withUpdate(latest, url);
  if (retryAfterHeader) {
    // Retry-After in delta-seconds (the server never sends the HTTP-date form).
    const std::string& v = *retryAfterHeader;
    bool digits = !v.empty() && v.size() <= 9;
    for (char c : v) digits = digits && c >= '0' && c <= '9';
    if (digits) e.withRetryAfter(std::atoi(v.c_str()));
  }
  return e;
}

}  // namespace detail
}  // namespace keywarden
