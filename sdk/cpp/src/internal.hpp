// Library-internal declarations shared by the source files (and the unit tests).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "keywarden/keywarden.hpp"

namespace keywarden::detail {

/** Error(verification) with its reason, message "response refused (reason): what". */
Error verificationError(const std::string& reason, const std::string& what);

/** The error for a verified non-200 answer (table lookup; 426 and 429 data picked up). */
Error errorFromAnswer(int status, const nlohmann::json& detail, const std::string* retryAfterHeader);

/** kid -> raw 32-byte Ed25519 public key. */
using PinnedKeys = std::map<std::string, std::string>;
PinnedKeys pinKeys(const std::vector<ResponseKey>& keys);

struct SignedAnswer {
  std::string method;
  std::string path;
  int status;
  const std::map<std::string, std::string>* headers;  // lower-cased names
  const std::string* body;
  std::string nonce;  // the X-Nonce this client sent
};

/**
 * docs/protocol.md 4 in the order of sdk/vectors/response-signatures.json: headers (unsigned), kid pinned
 * (unknown_kid), strict base64 of 64 bytes (bad_base64), |ts - now| <= window (stale), Ed25519
 * (bad_signature). Throws Error(verification); returns the answer's timestamp in ms since the epoch.
 */
std::int64_t verifyResponse(const PinnedKeys& keys, const SignedAnswer& answer, std::int64_t nowMs,
                            std::int64_t maxSkewSeconds);

/** ISO 8601 UTC ("2026-11-21T22:00:00.000Z", also without fraction or with +00:00); nullopt if not one. */
std::optional<TimePoint> parseIsoTime(const std::string& text);

/**
 * Strict ISO 8601 UTC as docs/protocol.md 1 writes it (2026-11-21T22:00:00.000Z): date, T, time, an optional
 * fraction of 1-9 digits (cut to milliseconds), then Z; nothing else. Unix ms, or nullopt. The form in
 * which offline license files and grace_until carry their times (same rule in every SDK).
 */
std::optional<std::int64_t> parseUtcMs(const std::string& text);
TimePoint timeFromMs(std::int64_t ms);
std::int64_t msOf(TimePoint t);

/** The sorted codes of a verified answer's `entitlements` (absent: none); throws verification malformed otherwise. */
std::vector<std::string> entitlementsOf(const nlohmann::json& answer);

std::string lowerAscii(std::string s);
std::string trimAscii(const std::string& s);

}  // namespace keywarden::detail
