#include "channel.hpp"

#include <random>
#include <set>

#include "crypto.hpp"

namespace keywarden::detail {

namespace {

Error notSentError(const std::string& what) { return Error(ErrorCode::network, what).withNotSent(true); }

/** Close codes after which the channel is not reopened for this session (stop, superseded, revoked, idle). */
bool finalClose(int code) { return code == 1000 || code == 4001 || code == 4003 || code == 4008; }

bool transient(ErrorCode c) {
  return c == ErrorCode::network || c == ErrorCode::timeout || c == ErrorCode::verification || c == ErrorCode::rate_limited ||
         c == ErrorCode::server;
}

}  // namespace

// ---- one connection ---------------------------------------------------------------------------

ChannelConnection::ChannelConnection(const ChannelContext& ctx, std::shared_ptr<WebSocket> ws, ChannelKeys keys)
    : ctx_(ctx), ws_(std::move(ws)), keys_(std::move(keys)) {}

ChannelConnection::OpenResult ChannelConnection::open(const ChannelContext& ctx, const std::string& session) {
  OpenResult r;
  const std::string secret = randomBytes(32);
  const std::string clientKey = base64UrlEncode(x25519Public(secret));
  WebSocket::Headers headers = {{"X-Session", session}, {"X-Nonce", clientKey}, {"X-Client-Version", ctx.version}};
  if (ctx.route) {
    std::string route = ctx.route();
    if (!route.empty()) headers.emplace_back("X-Keywarden-Route", route);
  }
  if (ctx.apiSecret) {
    std::int64_t ms = ctx.serverNowMs();
    std::string ts = std::to_string(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    headers.emplace_back("X-Timestamp", ts);
    headers.emplace_back("X-Signature", requestSignature(*ctx.apiSecret, canonicalRequest("GET", kChannelPath, ts, clientKey, "")));
  }
  UpgradeRefusal refusal;
  std::shared_ptr<WebSocket> ws;
  try {
    ws = WebSocket::open(ctx.baseUrl + kChannelPath, headers, ctx.openTimeout, ctx.caBundle, &refusal);
  } catch (const std::exception& e) {
    r.error = notSentError(std::string("channel: ") + e.what());
    return r;
  }
  if (!ws) {
    r.offered = refusal.status != 404 && refusal.status != 405;
    try {
      SignedAnswer a{"GET", kChannelPath, refusal.status, &refusal.headers, &refusal.body, clientKey};
      verifyResponse(ctx.keys, a, ctx.serverNowMs(), 300);
    } catch (const Error& e) {
      r.error = e;  // an unsigned answer (a proxy that does not pass WebSockets): nothing in it is believed
      return r;
    }
    nlohmann::json parsed = nlohmann::json::parse(refusal.body, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      r.error = verificationError("malformed", "channel refusal " + std::to_string(refusal.status) + " is not JSON");
      return r;
    }
    auto retry = refusal.headers.find("retry-after");
    auto d = parsed.find("detail");
    r.error = errorFromAnswer(refusal.status, d != parsed.end() ? *d : nlohmann::json(),
                              retry != refusal.headers.end() ? &retry->second : nullptr);
    return r;
  }
  try {
    bool binary = false;
    std::string hello = ws->readMessage(binary, ctx.openTimeout);
    if (binary) throw verificationError("malformed", "channel hello is not a text frame");
    ChannelKeys keys = verifyChannelHello(ctx.keys, ctx.serverNowMs(), session, clientKey, secret, hello);
    r.conn = std::make_shared<ChannelConnection>(ctx, ws, std::move(keys));
  } catch (const Error& e) {
    ws->terminate();
    r.error = e;
  } catch (const std::exception& e) {
    ws->terminate();
    r.error = Error(ErrorCode::network, std::string("channel: ") + e.what());
  }
  return r;
}

void ChannelConnection::start(std::function<void(const ChannelPush&)> onPush,
                              std::function<void(int, const std::optional<Error>&)> onClose) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    onPush_ = std::move(onPush);
    onClose_ = std::move(onClose);
  }
  std::weak_ptr<ChannelConnection> weak = shared_from_this();
  ws_->start(
      [weak](const std::string& frame, bool binary) {
        if (auto self = weak.lock()) self->receive(frame, binary);
      },
      [weak](int code) {
        if (auto self = weak.lock()) self->finish(code, std::nullopt);
      });
}

bool ChannelConnection::isOpen() const {
  std::lock_guard<std::mutex> lk(mu_);
  return !closed_;
}

nlohmann::json ChannelConnection::call(const std::string& op, const nlohmann::json& body) {
  nlohmann::json rest = nlohmann::json::object();
  for (auto it = body.begin(); it != body.end(); ++it)
    if (it.key() != "session") rest[it.key()] = it.value();
  auto p = std::make_shared<Pending>();
  std::int64_t seq;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (closed_) throw notSentError("channel closed");
    seq = ++out_;
    pending_[seq] = p;
    nlohmann::json payload = {{"seq", seq}, {"type", "call"}, {"op", op}, {"body", rest}};
    // Sent under the lock: frames must leave in seq order.
    if (!ws_->send(sealFrame(keys_.c2s, payload.dump()))) {
      pending_.erase(seq);
      throw notSentError("channel closed");
    }
  }
  std::unique_lock<std::mutex> lk(mu_);
  if (!cv_.wait_for(lk, ctx_.timeout, [&] { return p->done; })) {
    pending_.erase(seq);
    throw Error(ErrorCode::timeout, "no answer to " + op + " on the channel within " + std::to_string(ctx_.timeout.count()) + " ms");
  }
  if (p->error) throw *p->error;
  return p->body;
}

void ChannelConnection::close(int code) { ws_->close(code); }

void ChannelConnection::receive(const std::string& frame, bool binary) {
  std::int64_t expected;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (closed_) return;
    expected = in_ + 1;
  }
  FrameVerdict v = readChannelFrame(keys_.s2c, expected, frame, binary);
  if (!v.reason.empty()) {
    if (ctx_.log) ctx_.log(LogLevel::warn, "keywarden.channel.refused", v.reason);
    // First: the socket's own close must not report it as a plain drop.
    finish(1006, verificationError(v.reason, v.what));
    ws_->terminate();
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    in_ = expected;
  }
  const nlohmann::json& m = v.message;
  auto str = [](const nlohmann::json& o, const char* k) {
    auto it = o.find(k);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string type = str(m, "type");
  if (type == "reply") {
    auto re = m.find("re");
    std::shared_ptr<Pending> p;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (re != m.end() && re->is_number_integer()) {
        auto it = pending_.find(re->get<std::int64_t>());
        if (it != pending_.end()) {
          p = it->second;
          pending_.erase(it);
        }
      }
      if (!p) return;
      auto b = m.find("body");
      nlohmann::json body = b != m.end() && b->is_object() ? *b : nlohmann::json::object();
      auto st = m.find("status");
      int status = st != m.end() && st->is_number_integer() ? st->get<int>() : 0;
      if (status == 200) {
        auto ok = body.find("success");
        if (ok == body.end() || !ok->is_boolean() || !ok->get<bool>()) p->error = verificationError("malformed", "channel reply lacks success: true");
        else p->body = std::move(body);
      } else {
        auto ra = m.find("retry_after");
        std::string retry = ra != m.end() && ra->is_number() ? ra->dump() : std::string();
        auto d = body.find("detail");
        p->error = errorFromAnswer(status, d != body.end() ? *d : nlohmann::json(), retry.empty() ? nullptr : &retry);
      }
      p->done = true;
    }
    cv_.notify_all();
    return;
  }
  ChannelPush push;
  push.type = type;
  if (type == "revoked") {
    push.reason = str(m, "reason");
    push.detail = str(m, "detail");
  } else if (type == "update_required") {
    auto d = m.find("detail");
    nlohmann::json detail = d != m.end() && d->is_object() ? *d : nlohmann::json::object();
    push.message = str(detail, "message");
    if (push.message.empty()) push.message = "A new version is required.";
    push.latestVersion = str(detail, "latest_version");
    push.updateUrl = str(detail, "update_url");
  } else if (type == "notice") {
    push.message = str(m, "message");
    push.at = str(m, "at");
  } else {
    return;  // pong, or a message type of a newer server: verified, and harmless to skip
  }
  std::function<void(const ChannelPush&)> cb;
  {
    std::lock_guard<std::mutex> lk(mu_);
    cb = onPush_;
  }
  if (cb) cb(push);
}

void ChannelConnection::finish(int code, std::optional<Error> error) {
  std::function<void(int, const std::optional<Error>&)> cb;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (closed_) return;
    closed_ = true;
    for (auto& [seq, p] : pending_) {
      // Sent, unanswered: the server may have acted on it (like a REST answer lost on the way).
      p->error = error ? *error
                       : Error(ErrorCode::network, "channel closed (" + std::to_string(code) + ") before the answer to call " +
                                                       std::to_string(seq));
      p->done = true;
    }
    pending_.clear();
    cb = std::move(onClose_);
    onClose_ = nullptr;
    onPush_ = nullptr;
  }
  cv_.notify_all();
  if (cb) cb(code, error);
}

// ---- the heartbeat's link ---------------------------------------------------------------------

ChannelLink::ChannelLink(ChannelContext ctx, std::string session) : ctx_(std::move(ctx)), session_(std::move(session)) {}

ChannelLink::~ChannelLink() { close(); }

void ChannelLink::attach(std::function<void(const LinkEvent&)> sink) {
  std::deque<LinkEvent> backlog;
  {
    std::lock_guard<std::mutex> lk(mu_);
    sink_ = sink;
    backlog.swap(backlog_);
  }
  for (const auto& e : backlog) sink(e);
}

void ChannelLink::deliver(const LinkEvent& e) {
  std::function<void(const LinkEvent&)> sink;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!sink_) {
      backlog_.push_back(e);
      return;
    }
    sink = sink_;
  }
  sink(e);
}

bool ChannelLink::ready() const {
  std::lock_guard<std::mutex> lk(mu_);
  return conn_ && conn_->isOpen();
}

bool ChannelLink::connect() {
  std::string session;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (off_) return false;
    if (conn_ && conn_->isOpen()) return true;
    session = session_;
  }
  ChannelConnection::OpenResult r = ChannelConnection::open(ctx_, session);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (off_ || session != session_) {
      if (r.conn) r.conn->close();
      return false;
    }
    if (!r.conn) {
      if (ctx_.log) ctx_.log(LogLevel::debug, "keywarden.channel.unavailable", r.error->what());
      if (!r.offered || !transient(r.error->code())) off_ = true;
      else retry(r.error->retryAfter());
    } else {
      attempts_ = 0;
      conn_ = r.conn;
    }
  }
  if (!r.conn) {
    LinkEvent e;
    e.state = "closed";
    e.error = r.error;
    deliver(e);
    return false;
  }
  std::weak_ptr<ChannelLink> weak = weak_from_this();
  std::shared_ptr<ChannelConnection> conn = r.conn;
  LinkEvent opened;
  opened.state = "open";
  deliver(opened);
  std::weak_ptr<ChannelConnection> weakConn = conn;
  conn->start(
      [weak](const ChannelPush& p) {
        if (auto self = weak.lock()) {
          LinkEvent e;
          e.push = p;
          self->deliver(e);
        }
      },
      [weak, weakConn](int code, const std::optional<Error>& error) {
        auto self = weak.lock();
        auto c = weakConn.lock();
        if (self) self->closed(c, code, error);
      });
  return ready();
}

void ChannelLink::closed(const std::shared_ptr<ChannelConnection>& conn, int code, const std::optional<Error>& error) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (conn && conn_ == conn) conn_.reset();
    if (finalClose(code)) off_ = true;
    else retry(std::nullopt);
  }
  LinkEvent e;
  e.state = "closed";
  e.closeCode = code;
  e.error = error;
  deliver(e);
}

nlohmann::json ChannelLink::call(const std::string& op, const nlohmann::json& body) {
  std::shared_ptr<ChannelConnection> c;
  {
    std::lock_guard<std::mutex> lk(mu_);
    c = conn_;
  }
  if (!c) throw notSentError("channel closed");
  return c->call(op, body);
}

bool ChannelLink::rebind(const std::string& session) {
  std::shared_ptr<ChannelConnection> old;
  {
    std::lock_guard<std::mutex> lk(mu_);
    session_ = session;
    old = std::move(conn_);
    conn_.reset();
    attempts_ = 0;
    off_ = false;
    retryAt_.reset();
  }
  if (old) old->close();
  return connect();
}

void ChannelLink::close() {
  std::shared_ptr<ChannelConnection> old;
  std::thread worker;
  {
    std::lock_guard<std::mutex> lk(mu_);
    off_ = true;
    retryAt_.reset();
    old = std::move(conn_);
    conn_.reset();
    if (worker_.joinable()) {
      // The worker holds this link: its last reference may end on the worker itself.
      if (worker_.get_id() == std::this_thread::get_id()) worker_.detach();
      else worker = std::move(worker_);
    }
  }
  cv_.notify_all();
  if (old) old->close();
  if (worker.joinable()) worker.join();
}

void ChannelLink::retry(std::optional<int> hintSeconds) {
  if (off_) return;
  static thread_local std::mt19937 rng{std::random_device{}()};
  double base = std::min(30000.0, 500.0 * static_cast<double>(1u << std::min(attempts_++, 16)));
  double delay = base * std::uniform_real_distribution<double>(0.8, 1.2)(rng);
  if (hintSeconds) delay = std::max(delay, *hintSeconds * 1000.0);
  retryAt_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<std::int64_t>(delay));
  if (!worker_.joinable()) worker_ = std::thread([self = shared_from_this()] { self->work(); });
  cv_.notify_all();
}

void ChannelLink::work() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!off_) {
    if (!retryAt_) {
      cv_.wait(lk);
      continue;
    }
    if (cv_.wait_until(lk, *retryAt_, [&] { return off_ || !retryAt_ || std::chrono::steady_clock::now() >= *retryAt_; }) && !off_ &&
        retryAt_ && std::chrono::steady_clock::now() >= *retryAt_) {
      retryAt_.reset();
      lk.unlock();
      connect();
      lk.lock();
    }
  }
}

}  // namespace keywarden::detail
