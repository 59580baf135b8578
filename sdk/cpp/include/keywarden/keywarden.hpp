// Keywarden client SDK for C++17.
//
//   auto client = keywarden::Client::fromConfig("keywarden.json");
//   client.init();
//   auto lic = client.activateLicense(key);           // throws keywarden::Error
//   auto hb = client.startHeartbeat();                 // beats on its own std::thread
//
// Every call carries a fresh X-Nonce (and an HMAC when keywarden.json has an api_secret), and
// every answer is verified against the pinned Ed25519 keys before a byte of it is believed
// (docs/protocol.md 3-6). Failures are keywarden::Error exceptions with a code; the library never calls
// exit() or abort(). This header does not expose libcurl, libsodium or nlohmann/json.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace keywarden {

inline constexpr const char* kVersion = "1.0.0";

// ---------------------------------------------------------------------------------------------
// Errors

/** Every failure the host program sees. Same names in every Keywarden SDK (sdk/vectors/errors.json). */
enum class ErrorCode {
  invalid_key,
  key_used,
  banned,
  expired,
  hwid_mismatch,
  app_disabled,
  update_required,
  rate_limited,
  locked_out,
  session_expired,
  heartbeat_killed,
  verification,
  clock_skew,
  network,
  timeout,
  server,  // the fallback: an answer no table entry names (status and detail stay on the error)
  // docs/protocol.md 12 (licensing models)
  trial_disabled,    // the application offers no trials
  trial_used,        // this device already had its trial of this application
  offline_disabled,  // the application issues no offline license files
  offline_invalid,   // an offline license file this SDK refuses: see reason()
  session_limit,     // heartbeat/start while the key's concurrent sessions are all taken
};

/** "invalid_key", "rate_limited", ... */
const char* to_string(ErrorCode code) noexcept;
/** The code named `name`, or nullopt. */
std::optional<ErrorCode> errorCodeFromString(const std::string& name) noexcept;

/** The one error type: a coded failure of a call, or a response that was not believed. */
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);

  ErrorCode code() const noexcept { return code_; }
  /** HTTP status of a verified server answer; 0 when the SDK raised the error itself. */
  int status() const noexcept { return status_; }
  /** The answer's `detail` as JSON text, exactly as sent (a JSON string, the 426 object, a 422 array). */
  const std::string& detailJson() const noexcept { return detailJson_; }
  /**
   * For `verification`: unsigned, unknown_kid, bad_base64, stale, bad_signature, bad_proof, malformed.
   * For `offline_invalid` (checked in this order): malformed, unknown_kid, bad_signature, wrong_app,
   * wrong_hwid, clock_rolled_back, issued_in_future, expired, then wrong_request (an activation answer
   * to another request).
   */
  const std::string& reason() const noexcept { return reason_; }
  /** Seconds from Retry-After (rate_limited, locked_out). */
  std::optional<int> retryAfter() const noexcept { return retryAfter_; }
  /** From the 426 detail object (update_required). */
  const std::string& latestVersion() const noexcept { return latestVersion_; }
  const std::string& updateUrl() const noexcept { return updateUrl_; }
  /** True when the request certainly never reached the server (it was safe to send again). */
  bool notSent() const noexcept { return notSent_; }

  // Builders used by the library (and by custom transports' tests).
  Error& withStatus(int s) { status_ = s; return *this; }
  Error& withDetailJson(std::string d) { detailJson_ = std::move(d); return *this; }
  Error& withReason(std::string r) { reason_ = std::move(r); return *this; }
  Error& withRetryAfter(int s) { retryAfter_ = s; return *this; }
  Error& withUpdate(std::string latest, std::string url) { latestVersion_ = std::move(latest); updateUrl_ = std::move(url); return *this; }
  Error& withNotSent(bool v) { notSent_ = v; return *this; }

 private:
  ErrorCode code_;
  int status_ = 0;
  std::string detailJson_;
  std::string reason_;
  std::optional<int> retryAfter_;
  std::string latestVersion_;
  std::string updateUrl_;
  bool notSent_ = false;
};

/** keywarden.json (or a config string) that cannot be used. Thrown by fromConfig only. */
class ConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/** One row of the error table: an answer with exactly this status and detail string maps to code. */
struct ErrorTableEntry {
  int status;
  const char* detail;
  ErrorCode code;
};
/** The embedded copy of sdk/vectors/errors.json `entries` (checked by the unit tests). */
const std::vector<ErrorTableEntry>& errorTable();
/** `status_fallbacks` of errors.json: 403, 426, 429. */
const std::map<int, ErrorCode>& errorStatusFallbacks();
/** The code for a failure answer: exact (status, detail) entry, else status fallback, else server. */
ErrorCode codeFor(int status, const std::string* detailString);

// ---------------------------------------------------------------------------------------------
// Configuration (keywarden.json, format 1: sdk/vectors/README.md)

struct ResponseKey {
  std::string kid;
  std::string publicKey;  // base64 of the 32-byte Ed25519 public key
};

struct Config {
  std::string baseUrl;
  std::string appName;
  std::string apiKey;
  std::string version = "1.0";
  std::vector<ResponseKey> responseKeys;
  /** Present only when the application requires signed requests. */
  std::optional<std::string> apiSecret;
  /** The application's id (app_id): an offline license file must name it (docs/protocol.md 12.5). Empty: none. */
  std::string appId;

  /** Parses keywarden.json text; throws ConfigError. Unknown fields are ignored. */
  static Config parse(const std::string& jsonText);
  /** Reads and parses a file; throws ConfigError. */
  static Config load(const std::string& path);
};

// ---------------------------------------------------------------------------------------------
// Transport (replaceable: Options::transport)

struct HttpRequest {
  std::string method;  // "POST"
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::chrono::milliseconds timeout{10000};
};

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-cased names
  std::string body;
};

/**
 * What a transport throws. `sent == false` promises that no byte of the request reached the server
 * (connection refused, DNS failure): the call may then be sent again unchanged. Anything else a
 * transport throws counts as a network error that may have reached the server.
 */
class TransportError : public std::runtime_error {
 public:
  enum class Kind { network, timeout };
  TransportError(Kind kind, bool sent, const std::string& message)
      : std::runtime_error(message), kind_(kind), sent_(sent) {}
  Kind kind() const noexcept { return kind_; }
  bool sent() const noexcept { return sent_; }

 private:
  Kind kind_;
  bool sent_;
};

class Transport {
 public:
  virtual ~Transport() = default;
  /** Returns any HTTP answer (also 4xx/5xx); throws TransportError when there is none. Thread-safe. */
  virtual HttpResponse send(const HttpRequest& request) = 0;
};

struct CurlTransportOptions {
  /** Proxy URL for libcurl (http://host:port, socks5://...). Empty: direct, environment ignored. */
  std::string proxy;
  /** CA bundle file for https (empty: libcurl's default store). */
  std::string caBundle;
  /** Largest answer accepted; bigger is a network error. */
  std::size_t maxResponseBytes = 1u << 20;
};

/** The default libcurl transport. */
std::shared_ptr<Transport> makeCurlTransport(const CurlTransportOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Client

enum class LogLevel { debug, info, warn, error };
/** event is a dotted name ("keywarden.heartbeat.degraded"), message human text. Called from any thread. */
using Logger = std::function<void(LogLevel level, const std::string& event, const std::string& message)>;
/** Wall clock used to check answer timestamps; injectable for tests. */
using Clock = std::function<std::chrono::system_clock::time_point()>;

struct Options {
  /** Overrides the config's base_url. */
  std::string baseUrl;
  /** Per-call timeout (every call, heartbeats included). */
  std::chrono::milliseconds timeout{10000};
  /** Extra attempts for a call that certainly never reached the server. */
  int retries = 2;
  /** Proxy for the default transport (ignored when `transport` is set). */
  std::string proxy;
  /** CA bundle for the default transport. */
  std::string caBundle;
  Logger logger;
  Clock clock;
  std::shared_ptr<Transport> transport;
  /** Asks for encrypted success bodies (docs/protocol.md 5); needs the config's api_secret. Max 35 chars. */
  std::string encKey;
  /** Largest clock offset adopted from the first verified answer; further off it is refused as stale. */
  std::chrono::seconds maxClockOffset{600};
  /**
   * Where offline license checks keep the latest time seen (docs/protocol.md 12.5). Empty: defaultStateFile(api_key).
   */
  std::string stateFile;
  /**
   * Where activationRequest keeps the nonce of this machine's latest activation request. Empty: the state
   * file's path with ".request.json" instead of ".json".
   */
  std::string requestFile;
};

struct AppInfo {
  std::string name;
  std::string version;
  bool hwidLock = false;
  std::string session;
};

using TimePoint = std::chrono::system_clock::time_point;

/** True when the sorted codes hold code. */
bool hasCode(const std::vector<std::string>& sortedCodes, const std::string& code) noexcept;

struct UserInfo {
  std::string username;
  int level = 0;
  /** nullopt: no expiry (lifetime). */
  std::optional<TimePoint> expiresAt;
  std::string message;
  /** The key's entitlement codes, sorted (docs/protocol.md 12.3). */
  std::vector<std::string> entitlements;
  bool hasEntitlement(const std::string& code) const noexcept { return hasCode(entitlements, code); }
};

struct LicenseInfo {
  int level = 0;
  /** nullopt: no expiry (lifetime key). */
  std::optional<TimePoint> expiresAt;
  std::string message;
  /** The key's entitlement codes, sorted (docs/protocol.md 12.3). */
  std::vector<std::string> entitlements;
  bool hasEntitlement(const std::string& code) const noexcept { return hasCode(entitlements, code); }
};

/** A trial key created for this device and activated at once (docs/protocol.md 12.4). */
struct TrialInfo {
  /** The plaintext key: the server shows it this once. */
  std::string key;
  int level = 0;
  std::optional<TimePoint> expiresAt;
  std::string message;
  std::vector<std::string> entitlements;
  bool hasEntitlement(const std::string& code) const noexcept { return hasCode(entitlements, code); }
};

/** A verified offline license file (docs/protocol.md 12.5): what it grants and until when. */
struct OfflineLicense {
  std::string appId;
  std::string licenseId;
  /** The username of a user license, nullopt for a license-only key. */
  std::optional<std::string> user;
  std::string hwid;
  std::int64_t level = 0;
  /** Sorted codes. */
  std::vector<std::string> entitlements;
  /** The key's own expiry, nullopt for a lifetime key. */
  std::optional<TimePoint> expiresAt;
  TimePoint issuedAt{};
  /** The file is accepted until this moment. */
  TimePoint validUntil{};
  std::string kid;
  bool hasEntitlement(const std::string& code) const noexcept { return hasCode(entitlements, code); }
};

/** A verified seat pool (the relay's license, kwpool1): what it grants and until when. */
struct SeatPool {
  std::string appId;
  std::string licenseId;
  std::string relayId;
  std::int64_t seats = 0;
  std::int64_t level = 0;
  /** Sorted codes. */
  std::vector<std::string> entitlements;
  std::optional<TimePoint> expiresAt;
  TimePoint validUntil{};
  TimePoint issuedAt{};
  std::string kid;
};

/**
 * A floating seat leased from a relay, renewed by a thread at half its remaining time until release() or
 * destruction (the last copy of the handle). A lease the relay forgot (404) is taken again.
 */
class SeatLease {
 public:
  struct State;
  explicit SeatLease(std::shared_ptr<State> state);
  SeatLease(const SeatLease&) = delete;
  SeatLease& operator=(const SeatLease&) = delete;
  SeatLease(SeatLease&&) noexcept = default;
  SeatLease& operator=(SeatLease&&) noexcept = default;
  /** Releases the seat. */
  ~SeatLease();
  std::string leaseId() const;
  std::string hwid() const;
  SeatPool pool() const;
  TimePoint expiresAt() const;
  int renewals() const;
  /** True while held and not past its expiry. */
  bool active() const;
  /** Why the seat was lost (session_limit, offline_invalid...), nullopt while held. */
  std::optional<Error> lost() const;
  /** Renews now (throws like the first lease). */
  void renew();
  /** Gives the seat back (DELETE); never throws (an unreachable relay lets the lease expire). */
  void release() noexcept;

 private:
  std::shared_ptr<State> state_;
};

struct InitOptions {
  std::string binaryHash;  // sent when non-empty (hash_check)
  std::optional<std::string> binaryToken;
  std::optional<std::string> binaryTokenHash;
};

// ---------------------------------------------------------------------------------------------
// Updates (the server's docs/releases.md)

/**
 * An update refused: an Error whose reason() is unknown_kid, bad_signature, size_mismatch, sha512_mismatch
 * (code verification) or download_failed (code server with the link's status() and detailJson(), network or
 * timeout). Same reason strings in every SDK (sdk/vectors/artifacts.json).
 */
class UpdateError : public Error {
 public:
  UpdateError(ErrorCode code, const std::string& reason, const std::string& message);
};

/** One file of an offered release, its signature already verified. */
struct Artifact {
  std::string appId;
  std::string version;  // the release's version (part of the signed message)
  std::string filename;
  std::string platform;
  std::string arch;
  std::uint64_t size = 0;
  std::string sha512;     // lower-case hex
  std::string signature;  // base64 Ed25519 over "kwart1.<app_id>.<version>.<filename>.<sha512>"
  std::string kid;
  std::string url;  // short-lived download link
  std::optional<TimePoint> urlExpiresAt;
};

struct UpdateOffer {
  std::string version;
  std::string channel;
  std::string notes;
  std::optional<TimePoint> publishedAt;
  std::vector<Artifact> artifacts;
};

/** Called after every chunk written: bytes received so far, and the artifact's size. */
using ProgressCallback = std::function<void(std::uint64_t received, std::uint64_t total)>;

class Client;
class Heartbeat;

struct BeatEvent {
  std::int64_t index;
  std::int64_t count;
};
struct DegradedEvent {
  Error error;
  /** True when the beat may have reached the server: its index is burnt and the token may be stale. */
  bool lost;
  bool reauthenticating;
  /** When the last beat verified (the verified heartbeat/start before the first beat). */
  TimePoint lastBeatAt{};
  /** Verification failures in a row, this one included. */
  int verificationFailures = 0;
};
/** `compromisedAfter` verification failures in a row: answers are being tampered with. */
struct CompromisedEvent {
  Error error;  // the last one
  int failures;
  TimePoint lastBeatAt;
};
/** Pushed on the realtime channel: the key, user or app was revoked (onKilled follows). */
struct RevokedEvent {
  /** license_banned, license_deleted, user_banned, user_deleted, hwid_reset, app_disabled, app_deleted, blacklisted, session_killed. */
  std::string reason;
  std::string detail;
};
/**
 * The license (or end user) expired while running (docs/protocol.md 12.8): pushed on the channel as `revoked` with
 * reason `expired`, or a beat refused (or unreachable) after the known expiry. onKilled follows with code expired.
 */
struct ExpiredEvent {
  std::optional<TimePoint> expiresAt;  // the expiry the client knew from its last verified activation
  std::string detail;
};
/** Pushed: force_update is on and this version is outdated. */
struct UpdateRequiredEvent {
  std::string message;
  std::string latestVersion;
  std::string updateUrl;
};
/** Pushed: a message from the vendor's dashboard. */
struct NoticeEvent {
  std::string message;
  std::optional<TimePoint> at;
};
/** The service cannot be reached and the grace period (docs/protocol.md 12.6) covers now: the license stays valid until graceUntil. */
struct OfflineEvent {
  Error error;  // why the service was not reached
  TimePoint graceUntil;
};
/** Still unreachable, and the grace period is over: the program decides (lock, stop); the heartbeat goes on trying. */
struct GraceExpiredEvent {
  TimePoint graceUntil;
  Error error;  // the latest failure to reach the service
};
/** The realtime channel opened ("open") or closed ("closed"; beats then go over REST). */
struct ChannelEvent {
  std::string state;
  int closeCode = 0;                 // the WebSocket close code, when closed
  std::optional<Error> error;        // why (a verification error when a frame was refused)
};

/**
 * healthy: the last beat verified; offline: the service cannot be reached and the grace period covers
 * now; degraded: the last beat failed (see lastBeatAt); compromised: `compromisedAfter` verification
 * failures in a row; revoked, expired (the license expired while running), killed, stopped: ended.
 */
enum class HeartbeatState { healthy, degraded, compromised, revoked, killed, stopped, offline, expired };
/** "healthy", "offline", "degraded", "compromised", "revoked", "expired", "killed", "stopped". */
const char* to_string(HeartbeatState state) noexcept;
struct KilledEvent {
  Error error;
};
struct StoppedEvent {
  std::string reason;  // "stop" or "killed"
};
struct RecoveredEvent {
  std::string session;
};

struct HeartbeatOptions {
  /** Beat period; 0 = the server's beat_interval. Beating faster is allowed (only late beats drift). */
  std::chrono::milliseconds interval{0};
  std::optional<std::int64_t> codeSize;
  /** Asked before every beat; default debuggerAttached(). */
  std::function<bool()> debuggerDetected;
  /** After a lost beat: run init, the same login/license and heartbeat/start again. */
  bool reauth = false;
  /** Custom re-authentication (used instead of repeating the last activation when set). */
  std::function<void(Client&)> reauthWith;
  /**
   * The realtime channel (GET /api/client/ws) for beats and pushes when the server offers it and the
   * client uses its default transport without a proxy; false: REST only.
   */
  bool channel = true;
  /**
   * Verification failures in a row (beats or re-authentication) after which onCompromised is called;
   * from then on the heartbeat does not re-authenticate by itself until a beat verifies.
   */
  int compromisedAfter = 5;

  // Events, all called on the heartbeat's own thread. A callback that throws is logged and ignored.
  std::function<void(const BeatEvent&)> onBeat;
  std::function<void(const DegradedEvent&)> onDegraded;
  std::function<void(const KilledEvent&)> onKilled;
  std::function<void(const StoppedEvent&)> onStopped;
  std::function<void(const RecoveredEvent&)> onRecovered;
  std::function<void(const CompromisedEvent&)> onCompromised;
  std::function<void(const RevokedEvent&)> onRevoked;
  std::function<void(const UpdateRequiredEvent&)> onUpdateRequired;
  std::function<void(const NoticeEvent&)> onNotice;
  std::function<void(const ChannelEvent&)> onChannel;
  /** Entering the offline state (once per outage). Every failed beat still calls onDegraded. */
  std::function<void(const OfflineEvent&)> onOffline;
  /** The grace period ended while the service still cannot be reached (once). */
  std::function<void(const GraceExpiredEvent&)> onGraceExpired;
  /** The license expired while running (final; onKilled with code expired follows). */
  std::function<void(const ExpiredEvent&)> onExpired;
};

/**
 * A client. Copies share one session (a cheap handle); every method is thread-safe. A failed
 * call throws keywarden::Error.
 */
class Client {
 public:
  /** configJsonOrPath: keywarden.json text (starts with '{') or a path to it. Throws ConfigError. */
  static Client fromConfig(const std::string& configJsonOrPath, Options options = {});
  Client(Config config, Options options = {});

  /** Opens a session: POST /api/client/init. */
  AppInfo init(const InitOptions& options = {});
  /** Registers, then logs in at once and ignores that login's failure (reference clients since 1.1). */
  UserInfo registerUser(const std::string& username, const std::string& password, const std::string& license,
                        const std::string& hwid = {});
  UserInfo login(const std::string& username, const std::string& password, const std::string& hwid = {});
  /** License-only activation; hwid defaults to machineHwid(). */
  LicenseInfo activateLicense(const std::string& key, const std::string& hwid = {});
  /**
   * heartbeat/start (its proof checked before the token is trusted) and a thread that beats until
   * stop() or a kill. systemId defaults to the machine hwid, codeHash to selfHash().
   */
  [[nodiscard]] Heartbeat startHeartbeat(const std::string& systemId = {}, const std::string& codeHash = {},
                                         HeartbeatOptions options = {});
  /** init + the last successful login/license again (what a heartbeat's reauth does). */
  void reauthenticate();

  // Licensing models (docs/protocol.md 12).
  /**
   * Creates this device's trial key and activates it (POST /api/client/trial). Once per device and
   * application: again throws trial_used; trial_disabled when the application offers none. The key is
   * remembered for re-authentication. hwid defaults to machineHwid().
   */
  TrialInfo trial(const std::string& hwid = {});
  /**
   * An offline license file for this machine (POST /api/client/offline), after a successful activation
   * on this session. Save it; loadOffline checks it without the service.
   */
  std::string offlineFile(const std::string& hwid = {});
  /**
   * Checks an offline license file without the service (docs/protocol.md 12.5): throws Error(offline_invalid)
   * with its reason(), or ConfigError when the config has no app_id. Every check records the clock in
   * the state file; on success entitlements() are the file's.
   */
  OfflineLicense loadOffline(const std::string& file, const std::string& hwid = {});
  /**
   * A "kwreq1" activation request for key on this machine, written with no network. Carry it to a connected
   * machine (dashboard or customer portal); pass its answer to completeActivation. A new request replaces the
   * kept nonce (requestFile()): answers to older ones are refused. components: optional name -> value.
   */
  std::string activationRequest(const std::string& key, const std::string& hwid = {},
                                const std::map<std::string, std::string>& components = {});
  /**
   * Checks the answer to this machine's latest activation request: every check of loadOffline, then its
   * request_nonce (offline_invalid with reason wrong_request for an answer to an older request, or when no
   * request is kept here). Save the answer; later starts check it with loadOffline.
   */
  OfflineLicense completeActivation(const std::string& response, const std::string& hwid = {});
  /** Where activationRequest keeps its nonce (Options::requestFile). */
  std::string requestFile() const;
  /**
   * Leases a floating seat from a relay on the local network (instead of the service) and keeps it renewed.
   * Believed only with a pool that verifies under the pinned keys and names this application (else
   * offline_invalid with a reason); every seat taken: session_limit. entitlements() become the pool's.
   */
  [[nodiscard]] SeatLease leaseSeat(const std::string& relayUrl, const std::string& hwid = {});
  /** The codes of the last verified license, login, register or trial answer, or of the last file loaded (sorted). */
  std::vector<std::string> entitlements() const;
  bool hasEntitlement(const std::string& code) const;
  /**
   * Until when the license stays valid while the service cannot be reached, from the latest verified
   * answer; nullopt when it grants none or a verified refusal ended it (docs/protocol.md 12.6).
   */
  std::optional<TimePoint> graceUntil() const;
  /** True while the (server-corrected) clock is before graceUntil(). */
  bool graceActive() const;
  /**
   * When the license (an end user's: the user) expires, from the last verified license, login, register or trial
   * answer; nullopt for a lifetime key or before any activation. A running heartbeat reports `expired` once the
   * server ends its session then (docs/protocol.md 12.8).
   */
  std::optional<TimePoint> expiresAt() const;
  /** Where loadOffline keeps the latest time seen (Options::stateFile or defaultStateFile). */
  std::string stateFile() const;

  // Updates (the server's docs/releases.md).
  /**
   * The newest release above `version` this activated key may install on platform/arch (channels
   * stable < rc < beta < alpha < dev: a channel is offered itself and everything more stable): nullopt, or
   * the offer whose every artifact's signature verified under the pinned keys (else UpdateError).
   * ConfigError when the config has no app_id.
   */
  std::optional<UpdateOffer> checkUpdate(const std::string& version, const std::string& channel = "stable",
                                         const std::string& platform = "any", const std::string& arch = "any");
  /**
   * Downloads `artifact` to `targetPath`: streamed into a temporary file in the same folder (progress after
   * each chunk), checked for size, SHA-512 and signature, then renamed over the target. Any failure removes
   * the temporary file, leaves the target untouched and throws UpdateError. The client's timeout bounds the
   * connect and each stall of the stream, not the whole download. Returns the target path.
   */
  std::string downloadUpdate(const Artifact& artifact, const std::string& targetPath, ProgressCallback progress = {});

  /** The salted machine id for this application (api_key is the salt). */
  std::string machineHwid() const;
  /** Session from init (empty before). */
  std::string session() const;
  /** Server clock minus local clock, once learned from the first verified answer. */
  std::optional<std::chrono::milliseconds> clockOffset() const;
  const Config& config() const;

  struct Impl;
  explicit Client(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<Impl>& impl() const { return impl_; }

 private:
  std::shared_ptr<Impl> impl_;
};

/**
 * A running heartbeat (docs/protocol.md 6). Beats on its own std::thread; a beat that never reached the
 * server is sent again with the same index and token; a lost answer reports `degraded` (and with
 * reauth re-authenticates); a server kill reports `killed` then `stopped`. `compromisedAfter`
 * verification failures in a row report `compromised`. A beat refused as `rejected` right after the
 * service was unreachable (a server that lost the session) re-authenticates once with reauth; if
 * that fails, `killed` carries that call's own error (e.g. banned). With the realtime channel the
 * pushes arrive as revoked (then killed), updateRequired, notice and channel events, all on the
 * heartbeat's thread. Destroying a running heartbeat stops it. Move-only.
 */
class Heartbeat {
 public:
  Heartbeat() = default;
  Heartbeat(Heartbeat&&) noexcept;
  Heartbeat& operator=(Heartbeat&&) noexcept;
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;
  ~Heartbeat();

  /**
   * Stops beating, waits for a beat in flight, sends heartbeat/stop. Never throws. Idempotent. From a
   * callback (the heartbeat thread) it only asks: the loop ends when the callback returns.
   */
  void stop() noexcept;
  bool running() const noexcept;
  /** True once the server killed it (onKilled was called). */
  bool killed() const noexcept;
  /** The server's beat_count of the current heartbeat session (restarts after a re-authentication). */
  std::int64_t beatCount() const noexcept;
  std::int64_t lastIndex() const noexcept;
  std::chrono::seconds beatInterval() const noexcept;
  /**
   * healthy, offline, degraded, compromised, or how it ended: revoked, expired, killed, stopped. Offline lasts
   * exactly as long as the grace: past graceUntil it reads degraded at once.
   */
  HeartbeatState state() const noexcept;
  /** When the last beat verified (the verified heartbeat/start before the first beat). */
  TimePoint lastBeatAt() const noexcept;
  /** True while the beats travel on the realtime channel. */
  bool onChannel() const noexcept;
  /** Blocks until this object verified `count` beats in all (across re-authentications); false on timeout or end. */
  bool waitForBeats(std::int64_t count, std::chrono::milliseconds timeout) const;
  /** Blocks until the heartbeat ended (killed or stopped); false on timeout. */
  bool waitUntilEnded(std::chrono::milliseconds timeout) const;

  // Replace a callback of HeartbeatOptions while running (thread-safe). Events that happened before
  // the call went to the previous callback: pass callbacks in HeartbeatOptions to miss none.
  void onBeat(std::function<void(const BeatEvent&)> fn);
  void onDegraded(std::function<void(const DegradedEvent&)> fn);
  void onKilled(std::function<void(const KilledEvent&)> fn);
  void onStopped(std::function<void(const StoppedEvent&)> fn);
  void onRecovered(std::function<void(const RecoveredEvent&)> fn);
  void onCompromised(std::function<void(const CompromisedEvent&)> fn);
  void onRevoked(std::function<void(const RevokedEvent&)> fn);
  void onUpdateRequired(std::function<void(const UpdateRequiredEvent&)> fn);
  void onNotice(std::function<void(const NoticeEvent&)> fn);
  void onChannel(std::function<void(const ChannelEvent&)> fn);
  void onOffline(std::function<void(const OfflineEvent&)> fn);
  void onGraceExpired(std::function<void(const GraceExpiredEvent&)> fn);
  void onExpired(std::function<void(const ExpiredEvent&)> fn);

  struct Impl;
  explicit Heartbeat(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------------
// Helpers

/** Windows MachineGuid, Linux /etc/machine-id (then /var/lib/dbus/machine-id), macOS IOPlatformUUID; "" if none. */
std::string rawMachineId();
/**
 * hex(sha256("kwhwid1\n" + salt + "\n" + lower(trim(raw id)))): the raw id never leaves the machine and
 * two vendors (different salts) cannot correlate users. Without a platform id: hostname-based fallback.
 */
std::string machineHwid(const std::string& salt = {});
/** SHA-256 (lower-case hex) of the running executable; throws Error(server) when unreadable. */
std::string selfHash();
/** SHA-256 (lower-case hex) of a file. */
std::string fileSha256(const std::string& path);
/** True when a debugger is attached (Windows IsDebuggerPresent, Linux TracerPid, macOS P_TRACED). */
bool debuggerAttached();

/**
 * Per user and application: <state dir>/keywarden/<first 16 hex of sha256(api_key)>.json, the state dir
 * being %LOCALAPPDATA% (Windows, folder Keywarden), ~/Library/Application Support (macOS, Keywarden),
 * else $XDG_STATE_HOME or ~/.local/state.
 */
std::string defaultStateFile(const std::string& apiKey);
/**
 * docs/protocol.md 12.5 on its own: checks `file` for application appId on machine hwid with `now` as the clock and
 * lastSeen as the state file's record. Throws Error(offline_invalid) with reason(), checked in this order:
 * malformed, unknown_kid, bad_signature, wrong_app, wrong_hwid, clock_rolled_back, issued_in_future, expired.
 */
OfflineLicense verifyLicenseFile(const std::string& file, const std::vector<ResponseKey>& keys, const std::string& appId,
                                 const std::string& hwid, TimePoint now, std::optional<TimePoint> lastSeen);

/** The relay's detail when every seat of its pool is leased (Error session_limit). */
inline constexpr const char* kNoSeats = "No seats available";
/** "kwreq1." base64url(UTF-8 JSON) for these values (nonce and time are the caller's; sdk/vectors/airgap.json). */
std::string buildActivationRequest(const std::string& appId, const std::string& key, const std::string& hwid,
                                   const std::string& nonce, const std::string& createdAt,
                                   const std::map<std::string, std::string>& components = {});
/** After the offline-file checks passed: request_nonce must be nonce (else Error offline_invalid, wrong_request). */
void checkRequestNonce(const std::string& file, const std::optional<std::string>& nonce);
/** A POOL checked in this order: malformed, unknown_kid, bad_signature, wrong_app, expired (Error offline_invalid). */
SeatPool verifyPool(const std::string& pool, const std::vector<ResponseKey>& keys, const std::string& appId, TimePoint now);

}  // namespace keywarden
