// A running heartbeat (PROTOCOL 6, SPEC heartbeat rules) on its own std::thread.
// A beat that certainly never reached the server is sent again with the same index and token
// (Client::Impl::call does that). A beat whose answer was lost cannot be: a replayed beat_index is
// refused and the new token is unknown. The heartbeat then reports `degraded` and, with reauth,
// runs init, the same activation and heartbeat/start again by itself; without it, it goes on with
// the next index and the old token, which works only if the server never saw the lost beat.
#include <condition_variable>
#include <thread>

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

}  // namespace

struct Heartbeat::Impl {
  std::shared_ptr<Client::Impl> client;
  std::string systemId;
  std::string codeHash;
  HeartbeatOptions o;

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

  bool wantsReauth() const { return o.reauth || static_cast<bool>(o.reauthWith); }

  static void run(std::shared_ptr<Impl> self) noexcept { self->loop(); }

  void loop() noexcept {
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait_for(lk, period(), [this] { return stopRequested; });
        if (stopRequested) break;
      }
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
      std::lock_guard<std::mutex> lk(mu);
      if (ended) return;  // killed
    }
    std::string s, t;
    {
      std::lock_guard<std::mutex> lk(mu);
      s = session;
      t = token;
    }
    try {
      client->call("heartbeat/stop", {{"session", s}, {"token", t}});
    } catch (const std::exception& e) {
      client->log(LogLevel::warn, "keywarden.heartbeat.stop_failed", e.what());
    } catch (...) {
      client->log(LogLevel::warn, "keywarden.heartbeat.stop_failed", "non-standard exception");
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      ended = true;
    }
    emit(&HeartbeatOptions::onStopped, StoppedEvent{"stop"}, "stopped");
    finish();
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
      nlohmann::json r = client->call("heartbeat", body);
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
      {
        std::lock_guard<std::mutex> lk(mu);
        token = newToken;
        lastIndex = index;
        count = beatCount;
        ++verified;
      }
      cv.notify_all();
      emit(&HeartbeatOptions::onBeat, BeatEvent{index, beatCount}, "beat");
    } catch (const Error& e) {
      if (isFinal(e.code())) return kill(e);
      bool lost = !(e.notSent() || notProcessed(e.code()));
      bool reauth = lost && wantsReauth();
      {
        std::lock_guard<std::mutex> lk(mu);
        if (lost) lastIndex = index;  // that index may have been used: never send it again
      }
      client->log(LogLevel::warn, "keywarden.heartbeat.degraded", e.what());
      emit(&HeartbeatOptions::onDegraded, DegradedEvent{e, lost, reauth}, "degraded");
      if (reauth) {
        {
          std::lock_guard<std::mutex> lk(mu);
          needsReauth = true;
        }
        recover();
      }
    }
  }

  /** init + activation + heartbeat/start again; on failure tried again at the next tick. */
  void recover() {
    try {
      Client c(client);
      if (o.reauthWith) o.reauthWith(c);
      else c.reauthenticate();
      HeartbeatStart started = client->openHeartbeat(systemId);
      {
        std::lock_guard<std::mutex> lk(mu);
        session = started.session;
        token = started.token;
        interval = started.beatInterval;
        lastIndex = 0;
        count = 0;
        needsReauth = false;
      }
      client->log(LogLevel::info, "keywarden.heartbeat.recovered", "new heartbeat session opened");
      emit(&HeartbeatOptions::onRecovered, RecoveredEvent{started.session}, "recovered");
    } catch (const Error& e) {
      if (isFinal(e.code())) return kill(e);
      emit(&HeartbeatOptions::onDegraded, DegradedEvent{e, true, true}, "degraded");
    } catch (const std::exception& x) {
      Error e(ErrorCode::server, std::string("re-authentication failed: ") + x.what());
      emit(&HeartbeatOptions::onDegraded, DegradedEvent{e, true, true}, "degraded");
    }
  }

  void kill(const Error& e) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (ended) return;
      ended = true;
      wasKilled = true;
    }
    client->log(LogLevel::error, "keywarden.heartbeat.killed", e.what());
    emit(&HeartbeatOptions::onKilled, KilledEvent{e}, "killed");
    emit(&HeartbeatOptions::onStopped, StoppedEvent{"killed"}, "stopped");
    finish();
  }
};

Heartbeat Client::startHeartbeat(const std::string& systemId, const std::string& codeHash, HeartbeatOptions options) {
  auto hb = std::make_shared<Heartbeat::Impl>();
  hb->client = impl_;
  hb->systemId = systemId.empty() ? machineHwid() : systemId;
  hb->codeHash = codeHash.empty() ? selfHash() : codeHash;
  hb->o = std::move(options);
  HeartbeatStart started = impl_->openHeartbeat(hb->systemId);
  hb->session = started.session;
  hb->token = started.token;
  hb->interval = started.beatInterval;
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
