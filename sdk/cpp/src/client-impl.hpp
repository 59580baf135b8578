// The state behind a keywarden::Client handle, shared by every copy of the handle and by its
// heartbeats (so a heartbeat thread keeps it alive on its own).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "internal.hpp"
#include "offline.hpp"

namespace keywarden {

namespace detail {
class ChannelLink;
}

/** What the SDK repeats to re-authenticate a heartbeat on its own. */
struct Activation {
  bool isLicense = false;
  std::string username, password, key, hwid;
};

struct HeartbeatStart {
  std::string session;
  std::string token;
  std::int64_t beatInterval;
};

struct Client::Impl {
  Impl(Config config, Options options);

  Config config;
  std::string baseUrl;
  std::chrono::milliseconds timeout;
  int retries;
  Logger logger;
  Clock clock;
  /** The realtime channel is used only with the default transport and no proxy (else every call keeps to REST). */
  bool channelCapable;
  std::string caBundle;
  std::string proxy;
  std::shared_ptr<Transport> transport;
  detail::PinnedKeys keys;
  std::string encKey;
  std::int64_t maxOffsetS;

  mutable std::mutex mu;  // guards everything below
  std::optional<std::int64_t> offsetMs;  // server minus local, from the first verified answer
  std::string session;
  // The worker owning this session as the last answer named it (X-Keywarden-Route): sent back on every
  // call so a balancer routing on it reaches that worker. Trusted for nothing else. Dropped after a
  // connection error, a timeout or a 502/503/504: the worker it names may be gone.
  std::string route;
  InitOptions initOptions;
  std::optional<Activation> lastActivation;
  // docs/protocol.md 12: only verified answers move these (guarded by mu).
  std::optional<std::int64_t> graceUntilMs;  // the latest verified grace_until
  std::optional<std::int64_t> expiryMs;      // the license's (or end user's) expires_at of the last verified activation
  std::vector<std::string> entitlements;     // sorted
  std::string stateFileOption;
  std::string requestFileOption;
  std::shared_ptr<detail::ClockRecord> clockRecord;

  /** Books a verified activation answer: its entitlements (malformed unless a list of codes) and its grace. */
  std::vector<std::string> activated(const nlohmann::json& answer);
  /** A verified answer's grace_until (absent or not strict ISO 8601 UTC: none). */
  void noteGrace(const nlohmann::json& answer);
  void endGrace();
  /** A verified refusal (any 4xx but 429) ends the grace at once; also one that came over the channel. */
  void noteRefusal(int status);
  bool graceActive() const;
  std::optional<std::int64_t> graceUntil() const;
  std::optional<std::int64_t> expiry() const;
  /** A beat was accepted well after the known expiry: the key was extended (its new date is not known). */
  void forgetExpiry();

  void log(LogLevel level, const std::string& event, const std::string& message) const noexcept;
  std::int64_t localNowMs() const;
  std::int64_t serverNowMs() const;
  std::string requireSession() const;

  /**
   * One verified client call. Sent again (fresh nonce, same body) only when the request certainly
   * never reached the server, or once after the server refused our request signature while our
   * clock was off (learned from that same signed answer).
   */
  nlohmann::json call(const std::string& endpoint, const nlohmann::json& body);
  /** heartbeat/start (on the channel when `link` opens, else REST) with its proof checked before the token is trusted. */
  HeartbeatStart openHeartbeat(const std::string& systemId, const std::shared_ptr<detail::ChannelLink>& link);
  /** A channel for a heartbeat of the current session, or nullptr when this client keeps to REST. */
  static std::shared_ptr<detail::ChannelLink> channelLink(const std::shared_ptr<Impl>& self);

 private:
  nlohmann::json once(const std::string& endpoint, const nlohmann::json& body, bool& offsetJustLearned);
  void verify(const std::string& path, const HttpResponse& res, const std::string& nonce);
};

}  // namespace keywarden
