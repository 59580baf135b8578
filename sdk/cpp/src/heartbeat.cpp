// A running heartbeat (docs/protocol.md 6, docs/spec.md "Heartbeat rules") on its own std::thread.
// A beat that certainly never reached the server is sent again with the same index and token
// (Client::Impl::call does that). A beat whose answer was lost cannot be: a replayed beat_index is
// refused and the new token is unknown. The heartbeat then reports `degraded` and, with reauth,
// runs init, the same activation and heartbeat/start again by itself; without it, it goes on with
// the next index and the old token, which works only if the server never saw the lost beat.
// A beat refused as `rejected` (403) right after the service was unreachable (network, timeout, 5xx)
// is a server that lost the session meanwhile (a restart): with reauth it re-authenticates once and
// goes on; if that fails (the key was banned meanwhile), `killed` carries that call's own error.
// Pushes of the realtime channel are queued by the channel's threads and handled on the heartbeat's.
// While the service cannot be reached and the grace period (docs/protocol.md 12.6) covers now, the state is
// `offline` (onOffline once per outage); once the grace is over onGraceExpired is called, and state()
// reads `degraded` from the moment the grace ends.
// Expiry (docs/protocol.md 12.8, docs/decisions.md): the server ends the session at expires_at. Knowing the expiry
// of the last verified activation, the heartbeat beats at most kExpiryCheck after it, so a REST client learns
// it on time too; a refusal then (or no answer at all) is `expired`; a beat accepted well after it means the
// key was extended. The local clock alone never ends a heartbeat the server still accepts.
#include <condition_variable>
#include <deque>
#include <thread>

#include "channel.hpp"
#include "client-impl.hpp"
#include "crypto.hpp"

namespace keywarden {

namespace {

/** Answers after which beating on is pointless. */
bool isFinal(ErrorCode c) {
  switch (c) {
    case ErrorCode::heartbeat_killed:
    case ErrorCode::banned:
    case ErrorCode::expired:
    case ErrorCode::app_disabled:
    case ErrorCode::invalid_key:
    case ErrorCode::hwid_mismatch:
    case ErrorCode::update_required:
    case ErrorCode::key_used:
      return true;
    default:
      return false;
  }
}

/** Answers given before the beat was processed: the same beat may be sent again. */
bool notProcessed(ErrorCode c) { return c == ErrorCode::rate_limited || c == ErrorCode::locked_out; }

/** The service could not be reached or could not answer: a connection error, a timeout, a 5xx. */
bool unreachable(const Error& e) { return e.code() == ErrorCode::network || e.code() == ErrorCode::timeout || e.status() >= 500; }

/** How long after the known expiry the heartbeat beats at the latest (the server ends the session within 1 s). */
constexpr std::int64_t kExpiryCheckMs = 1000;
/**
 * The clock learned from the server is exact to the second: a beat refused up to this long before the known
 * expiry is the expiry too; a beat accepted this long after it (plus kExpiryCheckMs) means the key was extended.
 */
constexpr std::int64_t kExpirySlackMs = 1000;

}  // namespace

const char* to_string(HeartbeatState state) noexcept {
  switch (state) {
    case HeartbeatState::healthy: return "healthy";
    case HeartbeatState::offline: return "offline";
    case HeartbeatState::degraded: return "degraded";
    case HeartbeatState::compromised: return "compromised";
    case HeartbeatState::revoked: return "revoked";
    case HeartbeatState::expired: return "expired";
    case HeartbeatState::killed: return "killed";
    case HeartbeatState::stopped: return "stopped";
  }
  return "unknown";
}

struct Heartbeat::Impl {
  std::shared_ptr<Client::Impl> client;
  std::string systemId;
  std::string codeHash;
  HeartbeatOptions o;
  std::shared_ptr<detail::ChannelLink> link;  // null: REST only

  mutable std::mutex mu;  // guards the fields below
  mutable std::condition_variable cv;
  std::string session;
  std::string token;
  std::int64_t interval = 30;
  std::int64_t lastIndex = 0;
  std::int64_t count = 0;
  std::int64_t verified = 0;  // beats verified by this object, across re-authentications
  bool needsReauth = false;
  bool stopRequested = false;
  bool ended = false;     // no more beats (stopping or killed)
  bool done = false;      // ended and every event delivered
  bool wasKilled = false;
  HeartbeatState state = HeartbeatState::healthy;
  TimePoint lastVerified{};
  int verificationFailures = 0;    // in a row; reset by a verified beat
  bool compromised = false;        // onCompromised called: no automatic re-authentication until a beat verifies
  bool afterOutage = false;        // the previous attempt found the service unreachable
  bool outageReauthSpent = false;  // the one re-authentication a `rejected` after an outage allows
  bool offlineTold = false;        // onOffline called, and neither a verified beat nor onGraceExpired since
  std::deque<detail::LinkEvent> linkEvents;  // from the channel's threads, handled on the heartbeat's

  std::mutex joinMu;
  std::thread thread;
  std::mutex cbMu;  // guards the callbacks of `o` (replaceable through the Heartbeat's setters)

  template <typename Ev>
  void emit(std::function<void(const Ev&)> HeartbeatOptions::*member, const Ev& ev, const char* name) noexcept {
    std::function<void(const Ev&)> fn;
    try {
      std::lock_guard<std::mutex> lk(cbMu);
      fn = o.*member;  // copied: called without the lock, so a callback may replace callbacks
    } catch (...) {
      return;
    }
    if (!fn) return;
    try {
      fn(ev);
    } catch (const std::exception& e) {
      client->log(LogLevel::error, "keywarden.heartbeat.listener_threw", std::string(name) + ": " + e.what());
    } catch (...) {
      client->log(LogLevel::error, "keywarden.heartbeat.listener_threw", name);
    }
  }

  std::chrono::milliseconds period() const {
    return o.interval.count() > 0 ? o.interval : std::chrono::milliseconds(interval * 1000);
  }

  /** When to wake next: the period, or (offline) the end of the grace period, so onGraceExpired is told on time. */
  std::chrono::steady_clock::time_point nextWake() const {
    auto next = std::chrono::steady_clock::now() + period();
    bool offline;
    {
      std::lock_guard<std::mutex> lk(mu);
      offline = state == HeartbeatState::offline;
    }
    auto until = client->graceUntil();
    if (offline && until) {
      auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<std::int64_t>(0, *until - client->serverNowMs()));
      if (end < next) next = end;
    }
    // The license expires before the next beat: beat just after, so the end is known on time over REST too.
    auto expiry = client->expiry();
    if (expiry) {
      std::int64_t toExpiry = *expiry - client->serverNowMs();
      if (toExpiry >= 0) {
        auto check = std::chrono::steady_clock::now() + std::chrono::milliseconds(toExpiry + kExpiryCheckMs);
        if (check < next) next = check;
      }
    }
    return next;
  }

  /** The known expiry is less than marginMs away or has passed (server-corrected clock). */
  bool pastExpiry(std::int64_t marginMs) const {
    auto expiry = client->expiry();
    return expiry && client->serverNowMs() + marginMs >= *expiry;
  }

  /** The license expired: onExpired, then onKilled with code expired. */
  void expire(const std::string& detail) {
    kill(Error(ErrorCode::expired, "expired: the license expired while running (" + detail + ")"), HeartbeatState::expired);
  }

  bool wantsReauth() const { return o.reauth || static_cast<bool>(o.reauthWith); }

  static void run(std::shared_ptr<Impl> self) noexcept { self->loop(); }

  /** On the channel when it is open; over REST when it is not, or went down before the call left. */
  nlohmann::json send(const std::string& op, const nlohmann::json& body) {
    if (link && link->ready()) {
      try {
        return link->call(op, body);
      } catch (const Error& e) {
        if (!e.notSent()) throw;
      }
    }
    return client->call(op, body);
  }

  void loop() noexcept {
    auto next = nextWake();
    for (;;) {
      std::deque<detail::LinkEvent> events;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait_until(lk, next, [this] { return stopRequested || !linkEvents.empty(); });
        if (stopRequested) break;
        events.swap(linkEvents);
      }
      for (const auto& e : events) onLink(e);
      {
        std::lock_guard<std::mutex> lk(mu);
        if (ended) return;  // killed (a revocation)
      }
      if (std::chrono::steady_clock::now() < next) continue;
      bool reauthNow;
      {
        std::lock_guard<std::mutex> lk(mu);
        reauthNow = needsReauth;
      }
      try {
        if (reauthNow) recover();
        else beatOnce();
      } catch (...) {
        client->log(LogLevel::error, "keywarden.heartbeat.unexpected", "a beat threw outside the error model");
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        if (ended) return;  // killed
      }
      next = nextWake();
    }
    std::string s, t;
    {
      std::lock_guard<std::mutex> lk(mu);
      s = session;
      t = token;
    }
    try {
      send("heartbeat/stop", {{"session", s}, {"token", t}});
    } catch (const std::exception& e) {
      client->log(LogLevel::warn, "keywarden.heartbeat.stop_failed", e.what());
    } catch (...) {
      client->log(LogLevel::warn, "keywarden.heartbeat.stop_failed", "non-standard exception");
    }
    if (link) link->close();
    {
      std::lock_guard<std::mutex> lk(mu);
      ended = true;
      state = HeartbeatState::stopped;
    }
    emit(&HeartbeatOptions::onStopped, StoppedEvent{"stop"}, "stopped");
    finish();
  }

  /** A push or state change of the channel, on the heartbeat's thread (after a beat in flight was judged). */
  void onLink(const detail::LinkEvent& e) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (ended) return;
    }
    if (!e.push) {
      emit(&HeartbeatOptions::onChannel, ChannelEvent{e.state, e.closeCode, e.error}, "channel");
      return;
    }
    const detail::ChannelPush& p = *e.push;
    if (p.type == "revoked" && p.reason == "expired") {
      expire(p.detail.empty() ? std::string("expired") : p.detail);
    } else if (p.type == "revoked") {
      emit(&HeartbeatOptions::onRevoked, RevokedEvent{p.reason, p.detail}, "revoked");
      Error k(ErrorCode::heartbeat_killed, "heartbeat_killed: revoked (" + p.reason + "): " + p.detail);
      kill(k, HeartbeatState::revoked);
    } else if (p.type == "update_required") {
      emit(&HeartbeatOptions::onUpdateRequired, UpdateRequiredEvent{p.message, p.latestVersion, p.updateUrl}, "update_required");
    } else {
      emit(&HeartbeatOptions::onNotice, NoticeEvent{p.message, detail::parseIsoTime(p.at)}, "notice");
    }
  }

  void finish() {
    {
      std::lock_guard<std::mutex> lk(mu);
      done = true;
    }
    cv.notify_all();
  }

  void beatOnce() {
    std::int64_t index;
    std::string previous, s;
    {
      std::lock_guard<std::mutex> lk(mu);
      index = lastIndex + 1;
      previous = token;
      s = session;
    }
    bool debugger = false;
    try {
      debugger = o.debuggerDetected ? o.debuggerDetected() : debuggerAttached();
    } catch (...) {
      debugger = false;
    }
    nlohmann::json body = {{"session", s},       {"token", previous},    {"system_id", systemId},
                           {"beat_index", index}, {"code_hash", codeHash}, {"debugger_detected", debugger}};
    if (o.codeSize) body["code_size"] = *o.codeSize;
    try {
      nlohmann::json r = send("heartbeat", body);
      auto nt = r.find("new_token");
      auto bc = r.find("beat_count");
      if (nt == r.end() || !nt->is_string() || bc == r.end() || !bc->is_number_integer())
        throw detail::verificationError("malformed", "beat answer lacks new_token or beat_count");
      std::string newToken = nt->get<std::string>();
      std::int64_t beatCount = bc->get<std::int64_t>();
      auto pf = r.find("proof");
      std::string proof = pf != r.end() && pf->is_string() ? pf->get<std::string>() : std::string();
      if (!detail::constantTimeEquals(proof, detail::beatProof(previous, s, index, newToken, beatCount)))
        throw detail::verificationError("bad_proof", "beat proof does not verify");
      client->noteGrace(r);
      // Accepted well after it: the key was extended meanwhile (its new expiry is not known here).
      if (pastExpiry(-(kExpiryCheckMs + kExpirySlackMs))) client->forgetExpiry();
      {
        std::lock_guard<std::mutex> lk(mu);
        token = newToken;
        lastIndex = index;
        count = beatCount;
        ++verified;
        lastVerified = std::chrono::system_clock::now();
        verificationFailures = 0;
        compromised = false;
        afterOutage = false;
        outageReauthSpent = false;
        offlineTold = false;
        if (!ended) state = HeartbeatState::healthy;
      }
      cv.notify_all();
      emit(&HeartbeatOptions::onBeat, BeatEvent{index, beatCount}, "beat");
    } catch (const Error& e) {
      bool lostSession;
      {
        std::lock_guard<std::mutex> lk(mu);
        if (ended) return;  // ended meanwhile (revoked, killed, stopped): this beat's failure is no degradation
        // A server that came back without this session answers `rejected`: worth one re-authentication.
        lostSession = e.code() == ErrorCode::heartbeat_killed && e.status() == 403 && afterOutage && wantsReauth() && !outageReauthSpent;
        if (lostSession) outageReauthSpent = true;
      }
      // Past the known expiry a refused beat is the server's end of it, and no answer grants no grace.
      if ((e.code() == ErrorCode::heartbeat_killed && e.status() == 403 && pastExpiry(kExpirySlackMs)) ||
          (unreachable(e) && pastExpiry(0)))
        return expire(e.what());
      if (isFinal(e.code()) && !lostSession) return kill(e, HeartbeatState::killed);
      bool lost = !(e.notSent() || notProcessed(e.code()));
      {
        std::lock_guard<std::mutex> lk(mu);
        if (lost) lastIndex = index;  // that index may have been used: never send it again
      }
      if (failed(e, lost, lost && wantsReauth())) recover();
    }
  }

  /**
   * Books a failure and emits degraded (and compromised when the streak of verification failures
   * reaches the limit). Returns whether to re-authenticate: not once compromised, since an attacker
   * who spoils every answer would have it spend the program's rate limits for nothing.
   */
  bool failed(const Error& e, bool lost, bool reauthWanted) {
    bool reauth, newly, goingOffline, graceOver;
    int failures;
    TimePoint last;
    if (e.status() > 0) client->noteRefusal(e.status());  // a refusal on the realtime channel never went through call()
    const bool away = unreachable(e);
    const auto until = client->graceUntil();
    const bool covered = away && client->graceActive();
    {
      std::lock_guard<std::mutex> lk(mu);
      if (e.code() == ErrorCode::verification) ++verificationFailures;
      afterOutage = away;
      newly = !compromised && verificationFailures >= o.compromisedAfter;
      if (newly) compromised = true;
      reauth = reauthWanted && !compromised;
      needsReauth = reauth;
      if (!ended) state = compromised ? HeartbeatState::compromised : covered ? HeartbeatState::offline : HeartbeatState::degraded;
      goingOffline = covered && !compromised && !offlineTold;
      graceOver = away && !covered && offlineTold && until.has_value();
      if (goingOffline) offlineTold = true;
      if (graceOver || !until) offlineTold = false;
      failures = verificationFailures;
      last = lastVerified;
    }
    client->log(LogLevel::warn, "keywarden.heartbeat.degraded", e.what());
    emit(&HeartbeatOptions::onDegraded, DegradedEvent{e, lost, reauth, last, failures}, "degraded");
    if (goingOffline && until) {
      client->log(LogLevel::warn, "keywarden.heartbeat.offline", std::string(e.what()) + "; valid until the grace period ends");
      emit(&HeartbeatOptions::onOffline, OfflineEvent{e, detail::timeFromMs(*until)}, "offline");
    }
    if (graceOver && until) {
      client->log(LogLevel::warn, "keywarden.heartbeat.grace_expired", "the grace period ended");
      emit(&HeartbeatOptions::onGraceExpired, GraceExpiredEvent{detail::timeFromMs(*until), e}, "grace_expired");
    }
    if (newly) {
      client->log(LogLevel::warn, "keywarden.heartbeat.compromised", std::to_string(failures) + " verification failures in a row");
      emit(&HeartbeatOptions::onCompromised, CompromisedEvent{e, failures, last}, "compromised");
    }
    return reauth;
  }

  /** init + activation + heartbeat/start again; on failure tried again at the next tick. */
  void recover() {
    try {
      Client c(client);
      if (o.reauthWith) o.reauthWith(c);
      else c.reauthenticate();
      HeartbeatStart started = client->openHeartbeat(systemId, link);
      {
        std::lock_guard<std::mutex> lk(mu);
        if (ended) return;
        session = started.session;
        token = started.token;
        interval = started.beatInterval;
        lastIndex = 0;
        count = 0;
        needsReauth = false;
        afterOutage = false;
      }
      client->log(LogLevel::info, "keywarden.heartbeat.recovered", "new heartbeat session opened");
      emit(&HeartbeatOptions::onRecovered, RecoveredEvent{started.session}, "recovered");
    } catch (const Error& e) {
      if (unreachable(e) && pastExpiry(0)) return expire(e.what());
      // The call's own error (e.g. banned: the key was banned meanwhile), not a generic one.
      if (isFinal(e.code())) return kill(e, HeartbeatState::killed);
      failed(e, true, true);
    } catch (const std::exception& x) {
      failed(Error(ErrorCode::server, std::string("re-authentication failed: ") + x.what()), true, true);
    }
  }

  void kill(const Error& e, HeartbeatState how) {
    client->endGrace();  // every kill is a verified refusal, a revocation or an expiry: no grace after it
    const bool expired = e.code() == ErrorCode::expired;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (ended) return;
      ended = true;
      wasKilled = true;
      state = expired ? HeartbeatState::expired : how;
    }
    if (link) link->close();
    if (expired) {
      auto ms = client->expiry();
      std::optional<TimePoint> at;
      if (ms) at = detail::timeFromMs(*ms);
      client->log(LogLevel::warn, "keywarden.heartbeat.expired", "the license expired while running");
      emit(&HeartbeatOptions::onExpired, ExpiredEvent{at, e.what()}, "expired");
    }
    client->log(LogLevel::error, "keywarden.heartbeat.killed", e.what());
    emit(&HeartbeatOptions::onKilled, KilledEvent{e}, "killed");
    emit(&HeartbeatOptions::onStopped, StoppedEvent{"killed"}, "stopped");
    finish();
  }
};

Heartbeat Client::startHeartbeat(const std::string& systemId, const std::string& codeHash, HeartbeatOptions options) {
  if (options.compromisedAfter < 1) throw std::invalid_argument("keywarden: compromisedAfter must be at least 1");
  auto hb = std::make_shared<Heartbeat::Impl>();
  hb->client = impl_;
  hb->systemId = systemId.empty() ? machineHwid() : systemId;
  hb->codeHash = codeHash.empty() ? selfHash() : codeHash;
  hb->o = std::move(options);
  if (hb->o.channel) hb->link = Client::Impl::channelLink(impl_);
  HeartbeatStart started;
  try {
    started = impl_->openHeartbeat(hb->systemId, hb->link);
  } catch (...) {
    if (hb->link) hb->link->close();
    throw;
  }
  hb->session = started.session;
  hb->token = started.token;
  hb->interval = started.beatInterval;
  hb->lastVerified = std::chrono::system_clock::now();
  if (hb->link) {
    std::weak_ptr<Heartbeat::Impl> weak = hb;
    hb->link->attach([weak](const detail::LinkEvent& e) {
      auto self = weak.lock();
      if (!self) return;
      {
        std::lock_guard<std::mutex> lk(self->mu);
        if (self->ended) return;
        self->linkEvents.push_back(e);
      }
      self->cv.notify_all();
    });
  }
  hb->thread = std::thread(&Heartbeat::Impl::run, hb);
  return Heartbeat(hb);
}

Heartbeat::Heartbeat(Heartbeat&&) noexcept = default;

namespace {
/**
 * Asks the loop to stop and waits for it. From the heartbeat's own thread (a callback) it cannot
 * wait for itself: stop() just returns (the loop ends when the callback returns, and a later stop()
 * or the destructor on another thread joins); only the handle's destruction there detaches, since
 * a joinable std::thread must not be destroyed.
 */
void stopAndJoin(const std::shared_ptr<Heartbeat::Impl>& impl, bool destroying) noexcept {
  if (!impl) return;
  {
    std::lock_guard<std::mutex> lk(impl->mu);
    impl->stopRequested = true;
  }
  impl->cv.notify_all();
  std::lock_guard<std::mutex> jl(impl->joinMu);
  if (!impl->thread.joinable()) return;
  if (impl->thread.get_id() == std::this_thread::get_id()) {
    if (destroying) impl->thread.detach();
    return;
  }
  try {
    impl->thread.join();
  } catch (...) {
    // join only throws for a non-joinable or own thread, both excluded above
  }
}
}  // namespace

Heartbeat& Heartbeat::operator=(Heartbeat&& other) noexcept {
  if (this != &other) {
    stopAndJoin(impl_, true);
    impl_ = std::move(other.impl_);
  }
  return *this;
}

Heartbeat::~Heartbeat() { stopAndJoin(impl_, true); }

void Heartbeat::stop() noexcept { stopAndJoin(impl_, false); }

bool Heartbeat::running() const noexcept {
  if (!impl_) return false;
  std::lock_guard<std::mutex> lk(impl_->mu);
  return !impl_->ended;
}

bool Heartbeat::killed() const noexcept {
  if (!impl_) return false;
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->wasKilled;
}

std::int64_t Heartbeat::beatCount() const noexcept {
  if (!impl_) return 0;
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->count;
}

std::int64_t Heartbeat::lastIndex() const noexcept {
  if (!impl_) return 0;
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->lastIndex;
}

HeartbeatState Heartbeat::state() const noexcept {
  if (!impl_) return HeartbeatState::stopped;
  HeartbeatState s;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    s = impl_->state;
  }
  // Offline lasts exactly as long as the grace: past graceUntil it reads degraded, before the next beat fails.
  try {
    if (s == HeartbeatState::offline && !impl_->client->graceActive()) return HeartbeatState::degraded;
  } catch (...) {
    // the clock cannot throw in practice; the recorded state stands
  }
  return s;
}

TimePoint Heartbeat::lastBeatAt() const noexcept {
  if (!impl_) return TimePoint{};
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->lastVerified;
}

bool Heartbeat::onChannel() const noexcept {
  if (!impl_ || !impl_->link) return false;
  try {
    return impl_->link->ready();
  } catch (...) {
    return false;
  }
}

std::chrono::seconds Heartbeat::beatInterval() const noexcept {
  if (!impl_) return std::chrono::seconds(0);
  std::lock_guard<std::mutex> lk(impl_->mu);
  return std::chrono::seconds(impl_->interval);
}

namespace {
template <typename Ev>
void replace(const std::shared_ptr<Heartbeat::Impl>& impl, std::function<void(const Ev&)> HeartbeatOptions::*member,
             std::function<void(const Ev&)> fn) {
  if (!impl) return;
  std::lock_guard<std::mutex> lk(impl->cbMu);
  impl->o.*member = std::move(fn);
}
}  // namespace

void Heartbeat::onBeat(std::function<void(const BeatEvent&)> fn) { replace(impl_, &HeartbeatOptions::onBeat, std::move(fn)); }
void Heartbeat::onDegraded(std::function<void(const DegradedEvent&)> fn) {
  replace(impl_, &HeartbeatOptions::onDegraded, std::move(fn));
}
void Heartbeat::onKilled(std::function<void(const KilledEvent&)> fn) { replace(impl_, &HeartbeatOptions::onKilled, std::move(fn)); }
void Heartbeat::onStopped(std::function<void(const StoppedEvent&)> fn) {
  replace(impl_, &HeartbeatOptions::onStopped, std::move(fn));
}
void Heartbeat::onRecovered(std::function<void(const RecoveredEvent&)> fn) {
  replace(impl_, &HeartbeatOptions::onRecovered, std::move(fn));
}
void Heartbeat::onCompromised(std::function<void(const CompromisedEvent&)> fn) {
  replace(impl_, &HeartbeatOptions::onCompromised, std::move(fn));
}
void Heartbeat::onRevoked(std::function<void(const RevokedEvent&)> fn) { replace(impl_, &HeartbeatOptions::onRevoked, std::move(fn)); }
void Heartbeat::onUpdateRequired(std::function<void(const UpdateRequiredEvent&)> fn) {
  replace(impl_, &HeartbeatOptions::onUpdateRequired, std::move(fn));
}
void Heartbeat::onNotice(std::function<void(const NoticeEvent&)> fn) { replace(impl_, &HeartbeatOptions::onNotice, std::move(fn)); }
void Heartbeat::onChannel(std::function<void(const ChannelEvent&)> fn) { replace(impl_, &HeartbeatOptions::onChannel, std::move(fn)); }
void Heartbeat::onOffline(std::function<void(const OfflineEvent&)> fn) { replace(impl_, &HeartbeatOptions::onOffline, std::move(fn)); }
void Heartbeat::onGraceExpired(std::function<void(const GraceExpiredEvent&)> fn) {
  replace(impl_, &HeartbeatOptions::onGraceExpired, std::move(fn));
}
void Heartbeat::onExpired(std::function<void(const ExpiredEvent&)> fn) { replace(impl_, &HeartbeatOptions::onExpired, std::move(fn)); }

bool Heartbeat::waitForBeats(std::int64_t n, std::chrono::milliseconds timeout) const {
  if (!impl_) return false;
  std::unique_lock<std::mutex> lk(impl_->mu);
  impl_->cv.wait_for(lk, timeout, [&] { return impl_->verified >= n || impl_->done; });
  return impl_->verified >= n;
}

bool Heartbeat::waitUntilEnded(std::chrono::milliseconds timeout) const {
  if (!impl_) return true;
  std::unique_lock<std::mutex> lk(impl_->mu);
  return impl_->cv.wait_for(lk, timeout, [&] { return impl_->done; });
}

}  // namespace keywarden
