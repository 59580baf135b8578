// Air-gapped machines (the server's docs/air-gapped.md; vectors: sdk/vectors/airgap.json).
//
// Activation request: "kwreq1." base64url(UTF-8 JSON {"v": 1, "app_id", "key", "hwid", "components"?,
// "nonce", "created_at"}), written with no network. The nonce (16 random bytes) stays in a small JSON
// file; the answer is an offline license file whose payload carries request_nonce, accepted only when
// every offline-file check passes and that nonce is the one of this machine's latest request
// (else offline_invalid / wrong_request).
//
// Seat pool: "kwpool1." base64url(PAYLOAD) "." base64url(Ed25519 over the part before the second dot),
// signed by a pinned response key. A relay hands it out with every lease; a lease is believed only when
// its pool verifies, names this application and is still valid.
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "client-impl.hpp"
#include "crypto.hpp"
#include "offline.hpp"

namespace keywarden {

namespace {

[[noreturn]] void refuseAirgap(const std::string& reason, const std::string& what) {
  throw Error(ErrorCode::offline_invalid, "offline license refused (" + reason + "): " + what).withReason(reason);
}

std::vector<std::string> split3(const std::string& text) {
  const std::string f = detail::trimAscii(text);
  std::vector<std::string> parts;
  std::stringstream ss(f);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  if (!f.empty() && f.back() == '.') parts.push_back("");
  return parts;
}

std::string isoMs(TimePoint t) {
  const std::int64_t ms = detail::msOf(t);
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
#ifdef _WIN32
  gmtime_s(&tm, &secs);
#else
  gmtime_r(&secs, &tm);
#endif
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  return buf;
}

/** The kept nonce of requestFile, nullopt when there is none (or the file is damaged). */
std::optional<std::string> keptNonce(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json v = nlohmann::json::parse(ss.str(), nullptr, false);
  if (v.is_discarded() || !detail::text(v, "nonce")) return std::nullopt;
  return v["nonce"].get<std::string>();
}

}  // namespace

std::string buildActivationRequest(const std::string& appId, const std::string& key, const std::string& hwid,
                                   const std::string& nonce, const std::string& createdAt,
                                   const std::map<std::string, std::string>& components) {
  nlohmann::ordered_json body;
  body["v"] = 1;
  body["app_id"] = appId;
  body["key"] = key;
  body["hwid"] = hwid;
  if (!components.empty()) body["components"] = components;
  body["nonce"] = nonce;
  body["created_at"] = createdAt;
  return "kwreq1." + detail::base64UrlEncode(body.dump());
}

void checkRequestNonce(const std::string& file, const std::optional<std::string>& nonce) {
  if (!nonce) refuseAirgap("wrong_request", "no activation request is kept on this machine");
  auto parts = split3(file);
  std::string got;
  if (parts.size() > 1) {
    auto raw = detail::fromB64Url(parts[1]);
    nlohmann::json p = raw ? nlohmann::json::parse(*raw, nullptr, false) : nlohmann::json();
    if (p.is_object() && p.contains("request_nonce") && p["request_nonce"].is_string()) got = p["request_nonce"].get<std::string>();
  }
  unsigned diff = static_cast<unsigned>(got.size() ^ nonce->size());
  for (std::size_t i = 0; i < std::min(got.size(), nonce->size()); i++) diff |= static_cast<unsigned char>(got[i] ^ (*nonce)[i]);
  if (got.empty() || diff != 0) refuseAirgap("wrong_request", "not the answer to this machine's latest activation request");
}

SeatPool verifyPool(const std::string& pool, const std::vector<ResponseKey>& keys, const std::string& appId, TimePoint now) {
  detail::ensureSodium();
  detail::Signed env = detail::openSigned(pool, "kwpool1");
  const nlohmann::json& p = env.payload;
  bool good = detail::grantFieldsOk(p) && detail::text(p, "kid") && detail::text(p, "app_id") && detail::text(p, "license_id") &&
              detail::text(p, "relay_id") && p.contains("seats") && p["seats"].is_number_integer() && p["seats"].get<std::int64_t>() >= 1;
  if (!good) refuseAirgap("malformed", "pool payload lacks a field or has one of the wrong type");
  const std::string kid = p["kid"].get<std::string>();
  auto key = std::find_if(keys.begin(), keys.end(), [&](const ResponseKey& k) { return k.kid == kid; });
  if (key == keys.end()) refuseAirgap("unknown_kid", "pool signed under key " + kid + ", which this SDK does not pin");
  auto pk = detail::base64Decode(key->publicKey);
  if (!pk || !detail::ed25519Verify(*pk, env.signedText, env.signature)) refuseAirgap("bad_signature", "the pool's signature does not verify");
  if (p["app_id"].get<std::string>() != appId) refuseAirgap("wrong_app", "pool issued for application " + p["app_id"].get<std::string>());
  const std::int64_t until = *detail::parseUtcMs(p["valid_until"].get<std::string>());
  if (detail::msOf(now) >= until) refuseAirgap("expired", "pool valid until " + p["valid_until"].get<std::string>());
  SeatPool out;
  out.appId = p["app_id"].get<std::string>();
  out.licenseId = p["license_id"].get<std::string>();
  out.relayId = p["relay_id"].get<std::string>();
  out.seats = p["seats"].get<std::int64_t>();
  out.level = p["level"].get<std::int64_t>();
  for (const auto& e : p["entitlements"]) out.entitlements.push_back(e.get<std::string>());
  std::sort(out.entitlements.begin(), out.entitlements.end());
  out.entitlements.erase(std::unique(out.entitlements.begin(), out.entitlements.end()), out.entitlements.end());
  if (p["expires_at"].is_string()) out.expiresAt = detail::timeFromMs(*detail::parseUtcMs(p["expires_at"].get<std::string>()));
  out.validUntil = detail::timeFromMs(until);
  out.issuedAt = detail::timeFromMs(*detail::parseUtcMs(p["issued_at"].get<std::string>()));
  out.kid = kid;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Client: activation requests

std::string Client::requestFile() const {
  if (!impl_->requestFileOption.empty()) return impl_->requestFileOption;
  std::string state = stateFile();
  if (state.size() >= 5 && state.compare(state.size() - 5, 5, ".json") == 0) state.resize(state.size() - 5);
  return state + ".request.json";
}

namespace {
const std::string& requireAppId(const Config& c) {
  if (c.appId.empty()) throw ConfigError("keywarden config: app_id missing (offline files and pools are checked against it)");
  return c.appId;
}
}  // namespace

std::string Client::activationRequest(const std::string& key, const std::string& hwid,
                                      const std::map<std::string, std::string>& components) {
  const std::string& appId = requireAppId(impl_->config);
  const std::string nonce = detail::randomToken(16);
  const std::string created = isoMs(impl_->clock());
  const std::filesystem::path file(requestFile());
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  const std::filesystem::path tmp = file.parent_path() / (".kwreq-" + detail::randomToken(6));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << nlohmann::json({{"v", 1}, {"nonce", nonce}, {"created_at", created}}).dump();
    if (!out) throw std::runtime_error("keywarden: cannot write " + tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw std::runtime_error("keywarden: cannot write " + file.string());
  }
  return buildActivationRequest(appId, key, hwid.empty() ? machineHwid() : hwid, nonce, created, components);
}

OfflineLicense Client::completeActivation(const std::string& response, const std::string& hwid) {
  OfflineLicense lic = loadOffline(response, hwid);
  try {
    checkRequestNonce(response, keptNonce(requestFile()));
  } catch (const Error& e) {
    impl_->log(LogLevel::warn, "keywarden.offline.refused", e.what());
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->entitlements.clear();
    throw;
  }
  return lic;
}

// ---------------------------------------------------------------------------------------------
// Seat leases from a relay

struct SeatLease::State {
  std::shared_ptr<Client::Impl> client;
  std::string base;
  std::string hwid;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::string leaseId;
  SeatPool pool;
  std::int64_t expiresMs = 0;
  int renewals = 0;
  bool released = false;
  std::optional<Error> lost;
  std::thread thread;

  std::pair<int, nlohmann::json> send(const std::string& method, const std::string& path, const std::string& body) {
    HttpRequest req;
    req.method = method;
    req.url = base + path;
    if (!body.empty()) req.headers.emplace_back("content-type", "application/json");
    req.body = body;
    req.timeout = client->timeout;
    HttpResponse res;
    try {
      res = client->transport->send(req);
    } catch (const TransportError& t) {
      ErrorCode code = t.kind() == TransportError::Kind::timeout ? ErrorCode::timeout : ErrorCode::network;
      Error e(code, std::string(to_string(code)) + ": relay " + base + ": " + t.what());
      e.withNotSent(!t.sent());
      throw e;
    } catch (const std::exception& x) {
      throw Error(ErrorCode::network, "network: relay " + base + ": " + x.what());
    }
    return {res.status, nlohmann::json::parse(res.body, nullptr, false)};
  }

  static Error refused(int status, const nlohmann::json& body) {
    std::string detail = body.is_object() && body.contains("detail") && body["detail"].is_string() ? body["detail"].get<std::string>() : "";
    ErrorCode code = status == 409 && detail == kNoSeats ? ErrorCode::session_limit : ErrorCode::server;
    Error e(code, std::string(to_string(code)) + ": relay answered " + std::to_string(status) + " " + detail);
    e.withStatus(status).withDetailJson(nlohmann::json(detail).dump());
    return e;
  }

  void accept(int status, const nlohmann::json& p, int expect) {
    if (status != expect) throw refused(status, p);
    if (!p.is_object()) refuseAirgap("malformed", "relay lease is not a JSON object");
    SeatPool verified = verifyPool(p.contains("pool") && p["pool"].is_string() ? p["pool"].get<std::string>() : std::string(),
                                   client->config.responseKeys, client->config.appId, client->clock());
    auto expires = p.contains("expires_at") && p["expires_at"].is_string() ? detail::parseUtcMs(p["expires_at"].get<std::string>())
                                                                             : std::nullopt;
    if (!detail::text(p, "lease_id") || !expires || !p.contains("hwid") || p["hwid"] != detail::lowerAscii(hwid))
      refuseAirgap("malformed", "relay lease lacks lease_id or expires_at, or names another hwid");
    std::lock_guard<std::mutex> lk(mu);
    leaseId = p["lease_id"].get<std::string>();
    pool = std::move(verified);
    expiresMs = *expires;
  }

  void take() {
    auto [status, body] = send("POST", "/relay/v1/leases", nlohmann::json({{"hwid", hwid}}).dump());
    accept(status, body, 201);
  }

  std::string path() const {
    std::lock_guard<std::mutex> lk(mu);
    return "/relay/v1/leases/" + leaseId;  // the relay's ids are URL-safe tokens
  }

  void renew() {
    auto [status, body] = send("PUT", path(), "");
    if (status == 404) {
      client->log(LogLevel::info, "keywarden.relay.lease_gone", "leasing again");
      take();
    } else {
      accept(status, body, 200);
    }
    std::lock_guard<std::mutex> lk(mu);
    renewals++;
  }

  void run() {
    std::unique_lock<std::mutex> lk(mu);
    while (!released) {
      const std::int64_t wait = std::max<std::int64_t>(1000, (expiresMs - detail::msOf(client->clock())) / 2);
      if (cv.wait_for(lk, std::chrono::milliseconds(wait), [&] { return released; })) return;
      lk.unlock();
      try {
        renew();
        lk.lock();
      } catch (const Error& e) {
        lk.lock();
        const bool retry = e.code() == ErrorCode::network || e.code() == ErrorCode::timeout || e.code() == ErrorCode::server;
        if (retry && detail::msOf(client->clock()) < expiresMs) {
          client->log(LogLevel::warn, "keywarden.relay.renew_failed", e.what());
          continue;
        }
        lost = e;
        client->log(LogLevel::warn, "keywarden.relay.lease_lost", e.what());
        return;
      }
    }
  }
};

SeatLease::SeatLease(std::shared_ptr<State> state) : state_(std::move(state)) {}
SeatLease::~SeatLease() {
  if (state_) release();
}

std::string SeatLease::leaseId() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->leaseId;
}
std::string SeatLease::hwid() const { return state_->hwid; }
SeatPool SeatLease::pool() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->pool;
}
TimePoint SeatLease::expiresAt() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return detail::timeFromMs(state_->expiresMs);
}
int SeatLease::renewals() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->renewals;
}
bool SeatLease::active() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return !state_->released && !state_->lost && detail::msOf(state_->client->clock()) < state_->expiresMs;
}
std::optional<Error> SeatLease::lost() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->lost;
}
void SeatLease::renew() { state_->renew(); }

void SeatLease::release() noexcept {
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (state_->released) return;
    state_->released = true;
  }
  state_->cv.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
  try {
    auto [status, body] = state_->send("DELETE", state_->path(), "");
    if (status != 204 && status != 404) throw State::refused(status, body);
  } catch (const std::exception& e) {
    state_->client->log(LogLevel::warn, "keywarden.relay.release_failed", e.what());
  }
}

SeatLease Client::leaseSeat(const std::string& relayUrl, const std::string& hwid) {
  requireAppId(impl_->config);
  auto s = std::make_shared<SeatLease::State>();
  s->client = impl_;
  s->base = relayUrl;
  while (!s->base.empty() && s->base.back() == '/') s->base.pop_back();
  s->hwid = hwid.empty() ? machineHwid() : hwid;
  s->take();
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->entitlements = s->pool.entitlements;
  }
  s->thread = std::thread([raw = s.get()] { raw->run(); });
  return SeatLease(std::move(s));
}

}  // namespace keywarden
