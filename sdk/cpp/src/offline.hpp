// The clock record of offline license checks (docs/protocol.md 12.5): the latest clock reading seen, kept in
// a small JSON state file {"v": 1, "last_seen": <unix seconds>}. Internal.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "internal.hpp"

namespace keywarden::detail {

/** base64url without padding, strictly; nullopt otherwise (kwlic1 files, kwpool1 pools). */
std::optional<std::string> fromB64Url(const std::string& part);
/** A decoded "tag.payload.signature": the signed text, the 64-byte signature, the payload object. */
struct Signed {
  std::string signedText;
  std::string signature;
  nlohmann::json payload;
};
/** Splits and decodes text of the form tag.payload.signature, else Error(offline_invalid, malformed). */
Signed openSigned(const std::string& text, const std::string& tag);
/** What files and pools both grant: v 1, an integer level, entitlement codes, the times. */
bool grantFieldsOk(const nlohmann::json& p);
/** p[name] is a non-empty string. */
bool text(const nlohmann::json& p, const char* name);
/** p[name] is present and a strict UTC time (or null when nullable). */
bool utc(const nlohmann::json& p, const char* name, bool nullable);

/**
 * An unreadable or damaged file counts as no record; a file that cannot be written is logged and the
 * check goes on (both are things the end user can do anyway by deleting it).
 */
class ClockRecord {
 public:
  ClockRecord(std::string file, std::function<void(const std::string&, const std::string&)> warn)
      : file_(std::move(file)), warn_(std::move(warn)) {}
  const std::string& file() const { return file_; }
  std::optional<TimePoint> lastSeen() const;
  /** last_seen = max(last_seen, now), written atomically (a temporary file, then a rename). */
  void record(TimePoint now);

 private:
  std::string file_;
  std::function<void(const std::string&, const std::string&)> warn_;
  std::mutex mu_;
};

}  // namespace keywarden::detail
