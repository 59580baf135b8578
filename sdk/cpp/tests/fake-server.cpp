#include <sodium.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "aes256.hpp"
#include "crypto.hpp"
#include "internal.hpp"
#include "runner.hpp"
#include "support.hpp"

namespace kwtest {

namespace d = keywarden::detail;
using keywarden::HttpResponse;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string takeKey(const char* var) {
  static std::mutex mu;
  static std::map<std::string, std::size_t> next;
  std::lock_guard<std::mutex> lk(mu);
  std::vector<std::string> keys;
  std::stringstream ss(env(var));
  std::string item;
  while (std::getline(ss, item, ',')) keys.push_back(item);
  std::size_t& i = next[var];
  if (keys.size() < 4 || i >= keys.size() - 3) throw Failure{std::string("out of keys in ") + var};
  return keys[i++];
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json vectors(const std::string& file) {
  std::string dir = env("KW_VECTORS_DIR");
#ifdef KEYWARDEN_VECTORS_DIR
  if (dir.empty()) dir = KEYWARDEN_VECTORS_DIR;
#endif
  std::ifstream probe(dir + "/" + file);
  if (!probe) {
    if (env("KW_REQUIRE_VECTORS") == "1") throw Failure{"vectors not found in '" + dir + "' and KW_REQUIRE_VECTORS=1"};
    skip("sdk/vectors not found (set KW_VECTORS_DIR)");
  }
  return nlohmann::json::parse(readFile(dir + "/" + file));
}

std::int64_t unixSeconds(keywarden::TimePoint t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

FakeServer::FakeServer(std::optional<std::string> secret) : apiSecret(std::move(secret)) {
  d::ensureSodium();
  seed = d::sha256Raw("keywarden cpp fake server key");
  unsigned char pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
  crypto_sign_seed_keypair(pk, sk, reinterpret_cast<const unsigned char*>(seed.data()));
  publicKey.assign(reinterpret_cast<char*>(pk), sizeof pk);
}

std::string FakeServer::configJson() const {
  nlohmann::json c = {{"format", 1},
                      {"base_url", "http://fake.keywarden.test/"},
                      {"app_name", "fake"},
                      {"api_key", "0123456789abcdef0123456789abcdef"},
                      {"app_id", "fake-app-0001"},
                      {"version", "1.0"},
                      {"response_keys", {{{"kid", "k1"}, {"alg", "Ed25519"}, {"public_key", d::base64Encode(publicKey)}}}}};
  if (apiSecret) c["api_secret"] = *apiSecret;
  return c.dump();
}

keywarden::Client FakeServer::client(keywarden::Options o) {
  // The fake is owned by the test; the client only borrows it (no-op deleter).
  o.transport = std::shared_ptr<keywarden::Transport>(this, [](keywarden::Transport*) {});
  return keywarden::Client::fromConfig(configJson(), std::move(o));
}

std::int64_t FakeServer::nowSeconds() const {
  auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return now + clockOffsetSeconds;
}

std::vector<FakeRequest> FakeServer::requests() const {
  std::lock_guard<std::mutex> lk(mu_);
  return log_;
}

std::vector<std::string> FakeServer::paths() const {
  std::vector<std::string> out;
  for (const auto& r : requests()) out.push_back(r.path);
  return out;
}

HttpResponse FakeServer::signWith(const std::string& path, int status, const std::string& body, const std::string& nonce,
                                  std::int64_t ts, const std::string& kid, const std::string& keySeed) const {
  unsigned char pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
  crypto_sign_seed_keypair(pk, sk, reinterpret_cast<const unsigned char*>(keySeed.data()));
  std::string tsText = std::to_string(ts);
  std::string msg = d::responseMessage(kid, "POST", path, status, tsText, nonce, body);
  unsigned char sig[crypto_sign_BYTES];
  crypto_sign_detached(sig, nullptr, reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), sk);
  HttpResponse r;
  r.status = status;
  r.body = body;
  r.headers = {{"content-type", "application/json"},
               {"x-response-kid", kid},
               {"x-response-timestamp", tsText},
               {"x-response-signature", d::base64Encode(std::string(reinterpret_cast<char*>(sig), sizeof sig))}};
  return r;
}

std::string FakeServer::licenseFile(const std::string& payload, const std::string& keySeed) const {
  unsigned char pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
  crypto_sign_seed_keypair(pk, sk, reinterpret_cast<const unsigned char*>((keySeed.empty() ? seed : keySeed).data()));
  std::string head = "kwlic1." + d::base64UrlEncode(payload);
  unsigned char sig[crypto_sign_BYTES];
  crypto_sign_detached(sig, nullptr, reinterpret_cast<const unsigned char*>(head.data()), head.size(), sk);
  return head + "." + d::base64UrlEncode(std::string(reinterpret_cast<char*>(sig), sizeof sig));
}

namespace {
std::string isoAt(std::int64_t unixSeconds) {
  std::time_t t = static_cast<std::time_t>(unixSeconds);
  std::tm tm{};
#if defined(_WIN32)
  gmtime_s(&tm, &t);
#else
  gmtime_r(&t, &tm);
#endif
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
  return buf;
}

/** ISO 8601 UTC with the milliseconds of `unixMs`. */
std::string isoAtMs(std::int64_t unixMs) {
  std::string s = isoAt(unixMs / 1000);
  char ms[8];
  std::snprintf(ms, sizeof ms, "%03d", static_cast<int>(unixMs % 1000));
  return s.replace(s.size() - 4, 3, ms);
}

std::int64_t realNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

HttpResponse FakeServer::signedAnswer(const FakeRequest& req, int status, const std::string& body,
                                      std::map<std::string, std::string> extra) const {
  auto it = req.headers.find("x-nonce");
  HttpResponse r = signWith(req.path, status, body, it == req.headers.end() ? "" : it->second, nowSeconds(), "k1", seed);
  for (auto& [k, v] : extra) r.headers[k] = v;
  return r;
}

HttpResponse FakeServer::send(const keywarden::HttpRequest& http) {
  FakeRequest req;
  std::string url = http.url;
  auto p = url.find("/api/");
  req.path = p == std::string::npos ? url : url.substr(p);
  for (const auto& [k, v] : http.headers) req.headers[d::lowerAscii(k)] = v;
  req.rawBody = http.body;
  req.body = nlohmann::json::parse(http.body, nullptr, false);
  {
    std::lock_guard<std::mutex> lk(mu_);
    log_.push_back(req);
  }
  if (hook) {
    if (auto r = hook(req, *this)) return *r;
  }
  HttpResponse r = answer(req);
  if (after) after(req, r);
  return r;
}

HttpResponse FakeServer::answer(const FakeRequest& req) {
  auto fail = [&](int status, const std::string& detail) {
    return signedAnswer(req, status, nlohmann::json({{"detail", detail}}).dump());
  };
  if (apiSecret) {
    auto ts = req.headers.find("x-timestamp");
    auto sig = req.headers.find("x-signature");
    auto nonce = req.headers.find("x-nonce");
    if (ts == req.headers.end() || sig == req.headers.end() || nonce == req.headers.end()) return fail(401, "Invalid request signature");
    std::int64_t t = std::atoll(ts->second.c_str());
    if (t > nowSeconds() + 300 || t < nowSeconds() - 300) return fail(401, "Invalid request signature");
    std::string expected = d::requestSignature(*apiSecret, d::canonicalRequest("POST", req.path, ts->second, nonce->second, req.rawBody));
    if (!d::constantTimeEquals(expected, sig->second)) return fail(401, "Invalid request signature");
  }
  const nlohmann::json& b = req.body;
  auto str = [&](const char* k) { return b.is_object() && b.contains(k) && b[k].is_string() ? b[k].get<std::string>() : std::string(); };
  nlohmann::json out;
  std::lock_guard<std::mutex> lk(mu_);
  if (req.path == "/api/client/init") {
    session_ = d::randomToken(32);
    encKeyOfSession = str("enc_key");
    out = {{"success", true}, {"session", session_}, {"app", {{"name", "fake"}, {"version", "1.0"}, {"hwid_lock", false}}}};
  } else if (str("session") != session_ || session_.empty()) {
    return fail(401, "Invalid or expired session");
  } else if (req.path == "/api/client/license") {
    if (str("license") == "KEY-UNKNOWN") return fail(400, "Invalid license key");
    out = {{"success", true}, {"message", "License activated"}, {"level", 3}, {"entitlements", entitlements}};
    out["expires_at"] = lifetimeLicense.load() ? nlohmann::json()
                        : expiresAtMs.load() ? nlohmann::json(isoAtMs(expiresAtMs.load()))
                                             : nlohmann::json("2030-01-02T03:04:05.678Z");
    activatedHwid_ = d::lowerAscii(str("hwid"));
  } else if (req.path == "/api/client/register" || req.path == "/api/client/login") {
    if (req.path == "/api/client/login" && failLogin) return fail(401, "Invalid username or password");
    out = {{"success", true},
           {"message", "ok"},
           {"user", {{"username", str("username")}, {"level", 2}, {"expires_at", "2030-01-02T03:04:05.000Z"}}},
           {"entitlements", entitlements}};
    activatedHwid_ = d::lowerAscii(str("hwid"));
  } else if (req.path == "/api/client/trial") {
    if (trialHours == 0) return fail(403, "Trials are not enabled for this application.");
    std::string h = d::lowerAscii(str("hwid"));
    if (std::find(trials_.begin(), trials_.end(), h) != trials_.end()) return fail(403, "Trial already used on this device.");
    trials_.push_back(h);
    activatedHwid_ = h;
    out = {{"success", true}, {"message", "Trial started"}, {"level", 1}, {"expires_at", isoAt(nowSeconds() + trialHours * 3600)},
           {"entitlements", nlohmann::json::array()}, {"key", "TRIAL-" + d::toHex(d::randomBytes(6))}};
  } else if (req.path == "/api/client/offline") {
    if (offlineDays == 0) return fail(403, "Offline licenses are not enabled for this application.");
    if (activatedHwid_.empty()) return fail(403, "Session not activated. Call /login, /register or /license first.");
    if (d::lowerAscii(str("hwid")) != activatedHwid_) return fail(403, "HWID mismatch. Key locked to another device.");
    nlohmann::json payload = {{"v", 1}, {"kid", "k1"}, {"app_id", "fake-app-0001"}, {"license_id", "lic-0001"}, {"user", nullptr},
                              {"hwid", activatedHwid_}, {"level", 3}, {"entitlements", entitlements}, {"expires_at", nullptr},
                              {"issued_at", isoAt(nowSeconds())}, {"valid_until", isoAt(nowSeconds() + offlineDays * 86400LL)}};
    std::sort(payload["entitlements"].begin(), payload["entitlements"].end());
    out = {{"success", true}, {"license_file", licenseFile(payload.dump())}};
  } else if (req.path == "/api/client/heartbeat/start") {
    systemId_ = str("system_id");
    token_ = "TT" + d::toHex(d::sha256Raw(d::randomToken(16))).substr(0, 32);
    lastIndex_ = 0;
    beats_ = 0;
    std::string proof = d::startProof(session_, systemId_, token_);
    if (spoilStartProof) proof = d::startProof(session_, systemId_, token_ + "x");
    out = {{"success", true}, {"token", token_}, {"beat_interval", beatInterval.load()}, {"proof", proof}};
  } else if (req.path == "/api/client/heartbeat") {
    std::int64_t index = b.value("beat_index", static_cast<std::int64_t>(0));
    if (str("token") != token_ || index <= lastIndex_ || str("system_id") != systemId_) return fail(403, "rejected");
    if (b.value("debugger_detected", false)) {
      token_.clear();
      return fail(403, "rejected");
    }
    if (enforceExpiry && expiresAtMs.load() && realNowMs() + clockOffsetSeconds * 1000 >= expiresAtMs.load()) return fail(403, "rejected");
    std::string previous = token_;
    token_ = "TT" + d::toHex(d::sha256Raw(d::randomToken(16))).substr(0, 32);
    lastIndex_ = index;
    ++beats_;
    std::string proof = d::beatProof(previous, session_, index, token_, beats_);
    if (spoilBeatProof) proof = d::beatProof(previous, session_, index, token_, beats_ + 1);
    out = {{"success", true}, {"new_token", token_}, {"beat_count", beats_}, {"proof", proof}};
  } else if (req.path == "/api/client/heartbeat/stop") {
    if (str("token") != token_) return fail(401, "Invalid heartbeat token");
    token_.clear();
    out = {{"success", true}};
  } else {
    return fail(404, "Not found");
  }
  const bool grants = req.path != "/api/client/init" && req.path != "/api/client/offline" && req.path != "/api/client/heartbeat/stop";
  if (grants && graceSeconds >= 0) out["grace_until"] = isoAt(nowSeconds() + graceSeconds);
  std::string body = out.dump();
  std::string iv = str("init_iv");
  if (!iv.empty() && !encKeyOfSession.empty() && apiSecret) {
    std::string cipher = d::aes256CbcEncrypt(d::encryptionKey(encKeyOfSession, *apiSecret), d::encryptionIv(iv), body);
    body = nlohmann::json({{"enc", d::base64Encode(cipher)}}).dump();
  }
  return signedAnswer(req, 200, body);
}

}  // namespace kwtest
