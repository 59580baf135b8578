// The Keywarden client: every call carries a fresh nonce (and an HMAC when the config holds a
// secret), and every answer is verified against the pinned keys before a byte of it is believed
// (docs/protocol.md 3-5). Failures are keywarden::Error; nothing here exits or aborts.
#include <algorithm>
#include <cstdlib>
#include <thread>

#include "channel.hpp"
#include "client-impl.hpp"
#include "crypto.hpp"

namespace keywarden {

namespace {

constexpr std::int64_t kWindowSeconds = 300;
const std::string kClientPath = "/api/client/";

std::optional<TimePoint> timeField(const nlohmann::json& o, const char* name) {
  auto it = o.find(name);
  if (it == o.end() || !it->is_string()) return std::nullopt;
  return detail::parseIsoTime(it->get<std::string>());
}

std::string stringField(const nlohmann::json& o, const char* name) {
  auto it = o.find(name);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool isInt(const nlohmann::json& o, const char* name) {
  auto it = o.find(name);
  return it != o.end() && it->is_number_integer();
}

std::string stripSlashes(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

/** Caller mistakes (not failures of a call) are std::invalid_argument, as the standard library does. */
std::string dumpBody(const nlohmann::json& body) {
  try {
    return body.dump();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument("keywarden: a request field is not valid UTF-8");
  }
}

}  // namespace

Client::Impl::Impl(Config c, Options o)
    : config(std::move(c)),
      baseUrl(stripSlashes(o.baseUrl.empty() ? config.baseUrl : o.baseUrl)),
      timeout(o.timeout),
      retries(std::max(0, o.retries)),
      logger(std::move(o.logger)),
      clock(o.clock ? std::move(o.clock) : Clock([] { return std::chrono::system_clock::now(); })),
      channelCapable(!o.transport && o.proxy.empty()),  // before `transport` takes o.transport
      caBundle(o.caBundle),
      proxy(o.proxy),
      transport(o.transport ? std::move(o.transport) : makeCurlTransport({o.proxy, o.caBundle})),
      encKey(std::move(o.encKey)),
      maxOffsetS(static_cast<std::int64_t>(o.maxClockOffset.count())),
      stateFileOption(o.stateFile),
      requestFileOption(o.requestFile) {
  detail::ensureSodium();
  if (!encKey.empty() && !config.apiSecret)
    throw ConfigError("keywarden: encKey needs the api_secret of the config (docs/protocol.md 5 keys the cipher with it)");
  if (encKey.size() > 35) throw ConfigError("keywarden: encKey is at most 35 characters");
  keys = detail::pinKeys(config.responseKeys);
}

void Client::Impl::log(LogLevel level, const std::string& event, const std::string& message) const noexcept {
  if (!logger) return;
  try {
    logger(level, event, message);
  } catch (...) {
    // A logger that throws must not turn a working call into a failure.
  }
}

std::int64_t Client::Impl::localNowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock().time_since_epoch()).count();
}

std::int64_t Client::Impl::serverNowMs() const {
  std::lock_guard<std::mutex> lk(mu);
  return localNowMs() + offsetMs.value_or(0);
}

std::string Client::Impl::requireSession() const {
  std::lock_guard<std::mutex> lk(mu);
  if (session.empty()) throw Error(ErrorCode::session_expired, "call init() first");
  return session;
}

nlohmann::json Client::Impl::call(const std::string& endpoint, const nlohmann::json& body) {
  int attempt = 0;
  bool clockRetried = false;
  for (;;) {
    bool offsetJustLearned = false;
    try {
      return once(endpoint, body, offsetJustLearned);
    } catch (const Error& e) {
      if (e.notSent() && attempt < retries) {
        ++attempt;
        log(LogLevel::debug, "keywarden.call.retry", endpoint + " attempt " + std::to_string(attempt) + ": " + e.what());
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(2000, 100 << attempt)));
        continue;
      }
      if (e.code() == ErrorCode::clock_skew && !clockRetried && offsetJustLearned) {
        clockRetried = true;
        continue;
      }
      throw;
    }
  }
}

void Client::Impl::verify(const std::string& path, const HttpResponse& res, const std::string& nonce) {
  // Before the offset is known a larger distance is allowed: the answer is bound to this request's
  // fresh nonce, so it cannot be an old one replayed. Afterwards: 300 s around the server's time.
  std::optional<std::int64_t> known;
  {
    std::lock_guard<std::mutex> lk(mu);
    known = offsetMs;
  }
  std::int64_t limit = known ? kWindowSeconds : maxOffsetS;
  detail::SignedAnswer a{"POST", path, res.status, &res.headers, &res.body, nonce};
  std::int64_t serverMs = detail::verifyResponse(keys, a, localNowMs() + known.value_or(0), limit);
  if (!known) {
    std::int64_t offset = serverMs - localNowMs();
    {
      std::lock_guard<std::mutex> lk(mu);
      if (!offsetMs) offsetMs = offset;
    }
    if (offset > 5000 || offset < -5000)
      log(LogLevel::info, "keywarden.clock.offset", "server clock is " + std::to_string(offset) + " ms from ours");
  }
}

nlohmann::json Client::Impl::once(const std::string& endpoint, const nlohmann::json& body, bool& offsetJustLearned) {
  const std::string path = kClientPath + endpoint;
  const std::string initIv = encKey.empty() ? std::string() : detail::randomToken(16);
  nlohmann::json payload = body;
  if (!initIv.empty()) payload["init_iv"] = initIv;
  HttpRequest req;
  req.method = "POST";
  req.url = baseUrl + path;
  req.body = dumpBody(payload);
  req.timeout = timeout;
  const std::string nonce = detail::randomNonce();
  req.headers = {{"Content-Type", "application/json"}, {"Accept", "application/json"}, {"X-Nonce", nonce}};
  {
    std::lock_guard<std::mutex> lk(mu);
    if (!route.empty()) req.headers.emplace_back("X-Keywarden-Route", route);
  }
  if (config.apiSecret) {
    std::int64_t ms = serverNowMs();
    std::string ts = std::to_string(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    req.headers.emplace_back("X-Timestamp", ts);
    req.headers.emplace_back("X-Signature",
                             detail::requestSignature(*config.apiSecret, detail::canonicalRequest("POST", path, ts, nonce, req.body)));
  }

  HttpResponse res;
  // After a connection error, a timeout or a 502/503/504 (signed or not: a balancer's own answer is
  // not) the worker the route names may be gone: without it the balancer picks a live worker next.
  // Dropping a hint is all a forged answer could achieve: the next call is forwarded once.
  auto dropRoute = [this] {
    std::lock_guard<std::mutex> lk(mu);
    route.clear();
  };
  const auto gateway = [](int status) { return status == 502 || status == 503 || status == 504; };
  try {
    res = transport->send(req);
    if (gateway(res.status)) dropRoute();
    if (gateway(res.status) && !res.headers.count("x-response-kid") &&
        !res.headers.count("x-response-timestamp") && !res.headers.count("x-response-signature")) {
      // A proxy in front saying the service is unreachable: believed for nothing, but not an attack
      // either (whoever could forge it could as well cut the connection).
      throw Error(ErrorCode::server, "server: " + std::to_string(res.status) + " from a gateway (unsigned) on " + path)
          .withStatus(res.status);
    }
  } catch (const TransportError& t) {
    dropRoute();
    ErrorCode code = t.kind() == TransportError::Kind::timeout ? ErrorCode::timeout : ErrorCode::network;
    Error e(code, std::string(to_string(code)) + " on " + path + ": " + t.what());
    e.withNotSent(!t.sent());
    throw e;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& x) {
    dropRoute();
    throw Error(ErrorCode::network, "network on " + path + ": " + x.what());
  } catch (...) {
    dropRoute();
    throw Error(ErrorCode::network, "network on " + path + ": the transport threw a non-standard exception");
  }

  bool hadOffset;
  {
    std::lock_guard<std::mutex> lk(mu);
    hadOffset = offsetMs.has_value();
  }
  verify(path, res, nonce);
  if (auto named = res.headers.find("x-keywarden-route");
      named != res.headers.end() && !named->second.empty() && !gateway(res.status)) {
    std::lock_guard<std::mutex> lk(mu);
    route = named->second;
  }

  // Only now, with the signature checked, is the body parsed at all.
  nlohmann::json parsed = nlohmann::json::parse(res.body, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object())
    throw detail::verificationError("malformed", "answer of " + path + " (" + std::to_string(res.status) + ") is not a JSON object");

  if (res.status != 200) {
    noteRefusal(res.status);
    auto it = res.headers.find("retry-after");
    auto d = parsed.find("detail");
    Error e = detail::errorFromAnswer(res.status, d != parsed.end() ? *d : nlohmann::json(),
                                      it != res.headers.end() ? &it->second : nullptr);
    if (e.code() == ErrorCode::clock_skew && !hadOffset) {
      std::lock_guard<std::mutex> lk(mu);
      // Our timestamp was refused and this signed answer just taught us the server's clock: worth one retry.
      offsetJustLearned = offsetMs && (*offsetMs > 60000 || *offsetMs < -60000);
    }
    throw e;
  }
  auto enc = parsed.find("enc");
  if (enc != parsed.end() && enc->is_string() && !initIv.empty()) {
    auto plain = detail::decryptResponse(enc->get<std::string>(), encKey, *config.apiSecret, initIv);
    nlohmann::json inner = plain ? nlohmann::json::parse(*plain, nullptr, false) : nlohmann::json(nlohmann::json::value_t::discarded);
    if (inner.is_discarded() || !inner.is_object())
      throw detail::verificationError("malformed", "encrypted answer of " + path + " does not decrypt");
    parsed = std::move(inner);
  }
  auto ok = parsed.find("success");
  if (ok == parsed.end() || !ok->is_boolean() || !ok->get<bool>())
    throw detail::verificationError("malformed", "answer of " + path + " lacks success: true");
  return parsed;
}

std::shared_ptr<detail::ChannelLink> Client::Impl::channelLink(const std::shared_ptr<Impl>& self) {
  if (!self->channelCapable) return nullptr;
  detail::ChannelContext ctx;
  ctx.baseUrl = self->baseUrl;
  ctx.version = self->config.version;
  ctx.apiSecret = self->config.apiSecret;
  ctx.timeout = self->timeout;
  ctx.openTimeout = std::min(self->timeout, std::chrono::milliseconds(5000));
  ctx.keys = self->keys;
  ctx.caBundle = self->caBundle;
  // The link's threads may outlive the handles: they keep the client state alive.
  ctx.serverNowMs = [self] { return self->serverNowMs(); };
  ctx.route = [self] {
    std::lock_guard<std::mutex> lk(self->mu);
    return self->route;
  };
  ctx.log = [self](LogLevel l, const std::string& e, const std::string& m) { self->log(l, e, m); };
  return std::make_shared<detail::ChannelLink>(std::move(ctx), self->requireSession());
}

HeartbeatStart Client::Impl::openHeartbeat(const std::string& systemId, const std::shared_ptr<detail::ChannelLink>& link) {
  std::string s = requireSession();
  nlohmann::json r;
  bool answered = false;
  if (link && link->rebind(s)) {
    try {
      r = link->call("heartbeat/start", {{"system_id", systemId}});
      answered = true;
    } catch (const Error& e) {
      if (!e.notSent()) throw;  // else: the channel went down before the call left: REST below
    }
  }
  if (!answered) r = call("heartbeat/start", {{"session", s}, {"system_id", systemId}});
  std::string token = stringField(r, "token");
  if (token.empty() || !isInt(r, "beat_interval"))
    throw detail::verificationError("malformed", "heartbeat/start answer lacks token or beat_interval");
  if (!detail::constantTimeEquals(stringField(r, "proof"), detail::startProof(s, systemId, token)))
    throw detail::verificationError("bad_proof", "heartbeat/start proof does not verify");
  noteGrace(r);
  return {s, token, r["beat_interval"].get<std::int64_t>()};
}

// ---------------------------------------------------------------------------------------------

Client Client::fromConfig(const std::string& configJsonOrPath, Options options) {
  std::size_t first = configJsonOrPath.find_first_not_of(" \t\r\n");
  bool isJson = first != std::string::npos && configJsonOrPath[first] == '{';
  return Client(isJson ? Config::parse(configJsonOrPath) : Config::load(configJsonOrPath), std::move(options));
}

Client::Client(Config config, Options options) : impl_(std::make_shared<Impl>(std::move(config), std::move(options))) {}

const Config& Client::config() const { return impl_->config; }

std::string Client::session() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->session;
}

std::optional<std::chrono::milliseconds> Client::clockOffset() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  if (!impl_->offsetMs) return std::nullopt;
  return std::chrono::milliseconds(*impl_->offsetMs);
}

std::string Client::machineHwid() const { return keywarden::machineHwid(impl_->config.apiKey); }

AppInfo Client::init(const InitOptions& o) {
  nlohmann::json body = {{"api_key", impl_->config.apiKey}, {"version", impl_->config.version}};
  if (!impl_->encKey.empty()) body["enc_key"] = impl_->encKey;
  if (!o.binaryHash.empty()) body["binary_hash"] = o.binaryHash;
  if (o.binaryToken) {
    body["binary_token"] = *o.binaryToken;
    if (o.binaryTokenHash) body["binary_token_hash"] = *o.binaryTokenHash;
  }
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->route.clear();  // a new session lives wherever init lands
  }
  nlohmann::json r = impl_->call("init", body);
  auto app = r.find("app");
  std::string session = stringField(r, "session");
  if (session.empty() || app == r.end() || !app->is_object() || !app->contains("name") || !(*app)["name"].is_string())
    throw detail::verificationError("malformed", "init answer lacks session or app");
  AppInfo info;
  info.name = (*app)["name"].get<std::string>();
  auto v = app->find("version");
  info.version = v == app->end() ? std::string() : v->is_string() ? v->get<std::string>() : v->dump();
  auto lock = app->find("hwid_lock");
  info.hwidLock = lock != app->end() && lock->is_boolean() && lock->get<bool>();
  info.session = session;
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->session = session;
  impl_->initOptions = o;
  return info;
}

namespace {
UserInfo userFrom(const nlohmann::json& r) {
  auto u = r.find("user");
  if (u == r.end() || !u->is_object() || !u->contains("username") || !(*u)["username"].is_string() || !isInt(*u, "level"))
    throw detail::verificationError("malformed", "answer lacks user");
  UserInfo info;
  info.username = (*u)["username"].get<std::string>();
  info.level = (*u)["level"].get<int>();
  info.expiresAt = timeField(*u, "expires_at");
  info.message = stringField(r, "message");
  info.entitlements = detail::entitlementsOf(r);
  return info;
}
}  // namespace

UserInfo Client::registerUser(const std::string& username, const std::string& password, const std::string& license,
                              const std::string& hwid) {
  const std::string h = hwid.empty() ? machineHwid() : hwid;
  nlohmann::json r = impl_->call("register", {{"session", impl_->requireSession()},
                                              {"username", username},
                                              {"password", password},
                                              {"license", license},
                                              {"hwid", h}});
  UserInfo user = userFrom(r);
  impl_->activated(r);
  try {
    login(username, password, h);
  } catch (const Error& e) {
    impl_->log(LogLevel::warn, "keywarden.register.login_failed", e.what());
  }
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->lastActivation = Activation{false, username, password, {}, h};
  return user;
}

UserInfo Client::login(const std::string& username, const std::string& password, const std::string& hwid) {
  const std::string h = hwid.empty() ? machineHwid() : hwid;
  nlohmann::json r = impl_->call(
      "login", {{"session", impl_->requireSession()}, {"username", username}, {"password", password}, {"hwid", h}});
  UserInfo user = userFrom(r);
  impl_->activated(r);
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->lastActivation = Activation{false, username, password, {}, h};
  return user;
}

LicenseInfo Client::activateLicense(const std::string& key, const std::string& hwid) {
  const std::string h = hwid.empty() ? machineHwid() : hwid;
  nlohmann::json r = impl_->call("license", {{"session", impl_->requireSession()}, {"license", key}, {"hwid", h}});
  if (!isInt(r, "level")) throw detail::verificationError("malformed", "license answer lacks level");
  LicenseInfo info;
  info.level = r["level"].get<int>();
  info.expiresAt = timeField(r, "expires_at");
  info.message = stringField(r, "message");
  info.entitlements = impl_->activated(r);
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->lastActivation = Activation{true, {}, {}, key, h};
  return info;
}

void Client::reauthenticate() {
  std::optional<Activation> a;
  InitOptions o;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    a = impl_->lastActivation;
    o = impl_->initOptions;
  }
  if (!a) throw Error(ErrorCode::session_expired, "nothing to re-authenticate with: no login or license succeeded on this client");
  init(o);
  if (a->isLicense) activateLicense(a->key, a->hwid);
  else login(a->username, a->password, a->hwid);
}

}  // namespace keywarden
