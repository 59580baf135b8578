// The realtime channel: sdk/vectors/channel.json (the server's own bytes), then against a real
// server prepared by test/helpers/sdk-harness.ts: beats on the channel, a dashboard ban pushed to
// the running heartbeat, every refusal of test/helpers/channel-tamper-proxy.ts (KW_CHANNEL_TAMPER_URLS)
// answered by beating on over REST; and what the heartbeat tells the program when every beat answer
// is tampered with (KW_TAMPER_URLS.bad_beat_proof) or the service goes away for a while
// (KW_OUTAGE_URL). Helpers live in namespace chtest: the tests build as one unity unit.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "channel-protocol.hpp"
#include "crypto.hpp"
#include "internal.hpp"
#include "runner.hpp"
#include "support.hpp"

namespace d = keywarden::detail;
using keywarden::ErrorCode;
using keywarden::HeartbeatState;
using namespace std::chrono_literals;

namespace chtest {

std::string hex(const std::string& raw) { return d::toHex(raw); }

std::string unhex(const std::string& h) {
  std::string out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

/** Every heartbeat event as a line, plus the payloads a test looks at; waitFor blocks until a predicate holds. */
struct Events {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> log;
  std::vector<keywarden::DegradedEvent> degraded;
  std::vector<keywarden::ChannelEvent> channel;
  std::vector<keywarden::CompromisedEvent> compromised;
  std::vector<keywarden::RevokedEvent> revoked;
  std::vector<keywarden::NoticeEvent> notices;
  std::vector<keywarden::BeatEvent> beats;
  std::optional<keywarden::Error> killedWith;
  int recovered = 0;

  template <typename F>
  void add(const std::string& line, F&& record) {
    {
      std::lock_guard<std::mutex> lk(mu);
      record();
      log.push_back(line);
    }
    cv.notify_all();
  }
  template <typename P>
  bool waitFor(P&& pred, std::chrono::milliseconds t = 20s) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, t, [&] { return pred(); });
  }
  std::size_t count(const std::string& state) {
    return static_cast<std::size_t>(std::count_if(channel.begin(), channel.end(), [&](const auto& e) { return e.state == state; }));
  }

  keywarden::HeartbeatOptions options(std::chrono::milliseconds interval) {
    keywarden::HeartbeatOptions o;
    o.interval = interval;
    o.debuggerDetected = [] { return false; };
    o.onBeat = [this](const keywarden::BeatEvent& e) { add("beat", [&] { beats.push_back(e); }); };
    o.onDegraded = [this](const keywarden::DegradedEvent& e) { add("degraded", [&] { degraded.push_back(e); }); };
    o.onRecovered = [this](const keywarden::RecoveredEvent&) { add("recovered", [&] { ++recovered; }); };
    o.onKilled = [this](const keywarden::KilledEvent& e) { add("killed", [&] { killedWith = e.error; }); };
    o.onStopped = [this](const keywarden::StoppedEvent& e) { add("stopped " + e.reason, [] {}); };
    o.onCompromised = [this](const keywarden::CompromisedEvent& e) { add("compromised", [&] { compromised.push_back(e); }); };
    o.onRevoked = [this](const keywarden::RevokedEvent& e) { add("revoked", [&] { revoked.push_back(e); }); };
    o.onNotice = [this](const keywarden::NoticeEvent& e) { add("notice", [&] { notices.push_back(e); }); };
    o.onChannel = [this](const keywarden::ChannelEvent& e) { add("channel " + e.state, [&] { channel.push_back(e); }); };
    return o;
  }
};

keywarden::HttpResponse owner(const std::string& method, const std::string& path, const nlohmann::json& body = nullptr) {
  keywarden::HttpRequest r;
  r.method = method;
  r.url = kwtest::env("KW_BASE_URL") + path;
  r.headers = {{"Authorization", "Bearer " + kwtest::env("KW_OWNER_TOKEN")}, {"Accept", "application/json"}};
  if (!body.is_null()) {
    r.headers.emplace_back("Content-Type", "application/json");
    r.body = body.dump();
  }
  auto res = keywarden::makeCurlTransport()->send(r);
  if (res.status != 200) throw kwtest::Failure{method + " " + path + " answered " + std::to_string(res.status) + ": " + res.body};
  return res;
}

std::string plainAppId() { return nlohmann::json::parse(kwtest::env("KW_APP_IDS"))["PLAIN"].get<std::string>(); }

void ban(const std::string& key) {
  auto found = nlohmann::json::parse(owner("GET", "/api/apps/" + plainAppId() + "/licenses?q=" + key.substr(key.size() - 4)).body);
  std::string preview = key.substr(0, 4) + "****" + key.substr(key.size() - 4);
  for (const auto& row : found["items"])
    if (row["key_preview"] == preview) {
      owner("PATCH", "/api/licenses/" + row["id"].get<std::string>() + "/ban", {{"banned", true}});
      return;
    }
  throw kwtest::Failure{"license " + preview + " not found"};
}

void notice(const std::string& message) { owner("POST", "/api/apps/" + plainAppId() + "/notice", {{"message", message}}); }

std::string url(const char* var, const std::string& mode) {
  auto urls = nlohmann::json::parse(kwtest::env(var));
  if (!urls.contains(mode)) throw kwtest::Failure{std::string(var) + " has no mode " + mode};
  return urls[mode].get<std::string>();
}

/** An activated PLAIN client whose calls go to `base`. */
keywarden::Client activated(const std::string& base, const std::string& key, const std::string& hwid = "cpp-sdk-hwid-aaaaaaaa") {
  keywarden::Options o;
  o.baseUrl = base;
  auto c = keywarden::Client::fromConfig(kwtest::env("KW_CONFIG_PLAIN"), o);
  c.init();
  c.activateLicense(key, hwid);
  return c;
}

/** Connections to KW_OUTAGE_URL are refused for `ms`; meanwhile the server forgets the sessions (and bans `ban`). */
void outage(int ms, const std::string& banKey = {}) {
  keywarden::HttpRequest r;
  r.method = "POST";
  r.url = kwtest::env("KW_OUTAGE_URL") + "/__outage";
  nlohmann::json body = {{"ms", ms}};
  if (!banKey.empty()) body["ban"] = banKey;
  r.body = body.dump();
  r.headers = {{"Content-Type", "application/json"}};
  auto res = keywarden::makeCurlTransport()->send(r);
  if (res.status != 200) throw kwtest::Failure{"outage answered " + std::to_string(res.status)};
}

}  // namespace chtest

// ---- vectors ----------------------------------------------------------------------------------

KW_TEST(channel_handshake, "channel vectors/the handshake's keys (X25519, HKDF-SHA256)") {
  auto v = kwtest::vectors("channel.json");
  const auto& h = v["handshake"];
  std::string secret = chtest::unhex(h["client_secret_hex"]);
  CHECK_EQ(d::base64UrlEncode(d::x25519Public(secret)), h["client_key"].get<std::string>());
  std::string t = d::channelTranscript(h["kid"], h["ts"].get<std::int64_t>(), h["session"], h["client_key"], h["server_key"], h["conn"],
                                       h["beat_interval"].get<std::int64_t>());
  CHECK_EQ(t, h["transcript"].get<std::string>());
  auto keys = d::channelKeys(secret, h["server_key"], t);
  CHECK(keys.has_value());
  CHECK_EQ(chtest::hex(keys->s2c), h["s2c_hex"].get<std::string>());
  CHECK_EQ(chtest::hex(keys->c2s), h["c2s_hex"].get<std::string>());
  CHECK(!d::channelKeys(secret, d::base64UrlEncode(std::string(32, '\0')), t).has_value());  // low order
  CHECK_EQ(chtest::hex(d::sha1Raw("abc")), std::string("a9993e364706816aba3e25717850c26c9cd0d89d"));
}

KW_TEST(channel_hellos, "channel vectors/every hello case (malformed, unknown_kid, bad_base64, stale, bad_signature)") {
  auto v = kwtest::vectors("channel.json");
  std::vector<keywarden::ResponseKey> pinned;
  for (const auto& k : v["pinned_keys"]) pinned.push_back({k["kid"], k["public_key"]});
  auto keys = d::pinKeys(pinned);
  std::string secret = chtest::unhex(v["handshake"]["client_secret_hex"]);
  std::int64_t nowMs = v["now"].get<std::int64_t>() * 1000;
  int valid = 0, refused = 0;
  for (const auto& c : v["hello_cases"]) {
    const std::string name = c["name"];
    if (c["valid"].get<bool>()) {
      auto k = d::verifyChannelHello(keys, nowMs, c["session"], c["client_key"], secret, c["hello"]);
      if (c["hello"] == v["handshake"]["hello"]) CHECK_MSG(chtest::hex(k.s2c) == v["handshake"]["s2c_hex"].get<std::string>(), name);
      ++valid;
    } else {
      auto e = EXPECT_ERROR(d::verifyChannelHello(keys, nowMs, c["session"], c["client_key"], secret, c["hello"]));
      CHECK_EQ(e.code(), ErrorCode::verification);
      CHECK_MSG(e.reason() == c["reason"].get<std::string>(), name + ": got " + e.reason());
      ++refused;
    }
  }
  CHECK(valid >= 2);
  CHECK(refused >= 7);
}

KW_TEST(channel_frames, "channel vectors/every server frame (bad_mac, malformed, out_of_order), client frames byte for byte") {
  auto v = kwtest::vectors("channel.json");
  std::string s2c = chtest::unhex(v["handshake"]["s2c_hex"]);
  std::string c2s = chtest::unhex(v["handshake"]["c2s_hex"]);
  for (const auto& c : v["server_frames"]) {
    const std::string name = c["name"];
    auto frame = d::base64Decode(c["frame"]);
    CHECK_MSG(frame.has_value(), name);
    auto r = d::readChannelFrame(s2c, c["expected_seq"].get<std::int64_t>(), *frame, true);
    if (c["valid"].get<bool>()) CHECK_MSG(r.reason.empty() && r.message == nlohmann::json::parse(c["payload"].get<std::string>()), name);
    else CHECK_MSG(r.reason == c["reason"].get<std::string>(), name + ": got " + r.reason);
  }
  CHECK_EQ(d::readChannelFrame(s2c, 1, "{\"seq\":1}", false).reason, std::string("malformed"));  // text after the hello
  for (const auto& c : v["client_frames"])
    CHECK_EQ(d::base64Encode(d::sealFrame(c2s, c["payload"].get<std::string>())), c["frame"].get<std::string>());
}

// ---- against the server -------------------------------------------------------------------------

KW_INTEGRATION(channel_ban, "channel: beats on the channel; a dashboard ban reaches the running heartbeat as revoked within a second") {
  std::string key = kwtest::takeKey("KW_KEYS_PLAIN");
  auto c = chtest::activated(chtest::url("KW_CHANNEL_TAMPER_URLS", "pass"), key);
  chtest::Events ev;
  auto hb = c.startHeartbeat("cpp-sdk-channel-01", "abcdef0123456789", ev.options(150ms));
  CHECK(hb.onChannel());
  CHECK(ev.waitFor([&] { return ev.beats.size() >= 2; }));
  auto t0 = std::chrono::steady_clock::now();
  chtest::ban(key);
  CHECK(ev.waitFor([&] { return !ev.revoked.empty(); }));
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  CHECK_EQ(ev.revoked[0].reason, std::string("license_banned"));
  CHECK_MSG(ms < 1000, "revoked " + std::to_string(ms) + " ms after the ban");
  CHECK(ev.waitFor([&] { return ev.killedWith.has_value(); }));
  CHECK_EQ(ev.killedWith->code(), ErrorCode::heartbeat_killed);
  CHECK(hb.state() == HeartbeatState::revoked);
  CHECK(ev.degraded.empty());
}

KW_INTEGRATION(channel_hello, "channel: a hello with a forged signature is refused (bad_signature); the beats go on over REST") {
  auto c = chtest::activated(chtest::url("KW_CHANNEL_TAMPER_URLS", "hello"), kwtest::takeKey("KW_KEYS_PLAIN"));
  chtest::Events ev;
  auto hb = c.startHeartbeat("cpp-sdk-channel-02", "abcdef0123456789", ev.options(150ms));
  CHECK(ev.waitFor([&] { return ev.count("closed") >= 1 && ev.beats.size() >= 2; }));
  std::lock_guard<std::mutex> lk(ev.mu);
  CHECK(ev.channel[0].state == "closed" && ev.channel[0].error && ev.channel[0].error->reason() == "bad_signature");
  CHECK_EQ(ev.beats[1].index, 2);
}

namespace chtest {
void refusedFrame(const std::string& mode, const std::string& reason, int notices, const char* system) {
  auto c = activated(url("KW_CHANNEL_TAMPER_URLS", mode), kwtest::takeKey("KW_KEYS_PLAIN"));
  Events ev;
  auto hb = c.startHeartbeat(system, "abcdef0123456789", ev.options(60s));  // only pushes and refusals meanwhile
  CHECK(hb.onChannel());
  for (int i = 0; i < notices; ++i) notice("tampered " + std::to_string(i));
  CHECK(ev.waitFor([&] { return ev.count("closed") >= 1; }));
  CHECK(ev.waitFor([&] { return ev.count("open") >= 2; }));  // reopened: a new connection, not tampered
  std::lock_guard<std::mutex> lk(ev.mu);
  auto closed = std::find_if(ev.channel.begin(), ev.channel.end(), [](const auto& e) { return e.state == "closed"; });
  CHECK_MSG(closed->error && closed->error->reason() == reason, closed->error ? closed->error->reason() : std::string("no error"));
  CHECK(ev.notices.empty());  // never acted on
}
}  // namespace chtest

KW_INTEGRATION(channel_forge, "channel: forge: a pushed frame that does not verify is refused (bad_mac), never acted on") {
  chtest::refusedFrame("forge", "bad_mac", 1, "cpp-sdk-channel-03");
}

KW_INTEGRATION(channel_swap, "channel: swap: a pushed frame that does not verify is refused (out_of_order), never acted on") {
  chtest::refusedFrame("swap", "out_of_order", 2, "cpp-sdk-channel-04");
}

KW_INTEGRATION(channel_inject, "channel: inject: a frame recorded on another connection is refused (bad_mac)") {
  const std::string base = chtest::url("KW_CHANNEL_TAMPER_URLS", "inject");
  auto first = chtest::activated(base, kwtest::takeKey("KW_KEYS_PLAIN"));
  chtest::Events a;
  auto hbA = first.startHeartbeat("cpp-sdk-channel-05", "abcdef0123456789", a.options(60s));
  chtest::notice("recorded");
  CHECK(a.waitFor([&] { return !a.notices.empty(); }));
  CHECK_EQ(a.notices[0].message, std::string("recorded"));
  auto other = chtest::activated(base, kwtest::takeKey("KW_KEYS_PLAIN"), "cpp-sdk-hwid-bbbbbbbb");
  chtest::Events ev;
  auto hb = other.startHeartbeat("cpp-sdk-channel-06", "abcdef0123456789", ev.options(150ms));
  CHECK(ev.waitFor([&] { return ev.beats.size() >= 2; }));  // started and beating over REST meanwhile
  std::lock_guard<std::mutex> lk(ev.mu);
  auto refused = std::find_if(ev.channel.begin(), ev.channel.end(), [](const auto& e) { return e.error.has_value(); });
  CHECK(refused != ev.channel.end());
  CHECK_EQ(refused->error->reason(), std::string("bad_mac"));
  CHECK(ev.notices.empty());
}

KW_INTEGRATION(channel_absent, "channel: absent (404): beats over REST and does not ask again") {
  auto c = chtest::activated(chtest::url("KW_CHANNEL_TAMPER_URLS", "absent"), kwtest::takeKey("KW_KEYS_PLAIN"));
  chtest::Events ev;
  auto hb = c.startHeartbeat("cpp-sdk-channel-07", "abcdef0123456789", ev.options(150ms));
  CHECK(!hb.onChannel());
  // Six beats at 150 ms outlast the first reconnection delay (0.5 s +- 20%): none was made.
  CHECK(ev.waitFor([&] { return ev.beats.size() >= 6; }));
  std::lock_guard<std::mutex> lk(ev.mu);
  CHECK_EQ(ev.channel.size(), std::size_t{1});
  CHECK(ev.channel[0].state == "closed" && ev.channel[0].error.has_value());
  CHECK(ev.degraded.empty());
}

KW_INTEGRATION(channel_drop, "channel: dropped: the beats go on over REST, then the channel comes back (same session)") {
  auto c = chtest::activated(chtest::url("KW_CHANNEL_TAMPER_URLS", "drop"), kwtest::takeKey("KW_KEYS_PLAIN"));
  chtest::Events ev;
  auto hb = c.startHeartbeat("cpp-sdk-channel-08", "abcdef0123456789", ev.options(150ms));
  CHECK(ev.waitFor([&] { return ev.count("open") >= 2; }));  // reconnected
  std::size_t n;
  {
    std::lock_guard<std::mutex> lk(ev.mu);
    n = ev.beats.size();
  }
  CHECK(ev.waitFor([&] { return ev.beats.size() >= n + 2; }));
  std::lock_guard<std::mutex> lk(ev.mu);
  auto closed = std::find_if(ev.channel.begin(), ev.channel.end(), [](const auto& e) { return e.state == "closed"; });
  CHECK_EQ(closed->closeCode, 1006);
  for (const auto& b : ev.beats) CHECK_EQ(b.count, b.index);  // one token chain on both transports
  CHECK(ev.degraded.empty());
  CHECK_EQ(ev.recovered, 0);
}

KW_INTEGRATION(resilience_compromised, "resilience: every beat answer tampered -> degraded with lastBeatAt, compromised after 5, no endless re-auth") {
  auto c = chtest::activated(chtest::url("KW_TAMPER_URLS", "bad_beat_proof"), kwtest::takeKey("KW_KEYS_PLAIN"));
  chtest::Events ev;
  auto o = ev.options(50ms);
  o.reauth = true;
  auto hb = c.startHeartbeat("cpp-sdk-compromised", "abcdef0123456789", o);
  auto started = hb.lastBeatAt();
  CHECK(ev.waitFor([&] { return !ev.compromised.empty(); }, 30s));
  {
    std::lock_guard<std::mutex> lk(ev.mu);
    CHECK_EQ(ev.compromised[0].failures, 5);
    CHECK_EQ(ev.compromised[0].error.reason(), std::string("bad_proof"));
    CHECK(ev.compromised[0].lastBeatAt == started);
    CHECK(ev.degraded.size() >= 5);
    for (int i = 0; i < 5; ++i) {
      CHECK_EQ(ev.degraded[i].verificationFailures, i + 1);
      CHECK_EQ(ev.degraded[i].reauthenticating, i < 4);
      CHECK(ev.degraded[i].lastBeatAt == started);  // no beat verified since the start
    }
  }
  // No more re-authentication: the next beat carries the old token and the server refuses it.
  CHECK(ev.waitFor([&] { return ev.killedWith.has_value(); }, 30s));
  CHECK_EQ(ev.killedWith->code(), ErrorCode::heartbeat_killed);
  CHECK_EQ(ev.recovered, 4);
  CHECK(hb.state() == HeartbeatState::killed);
}

KW_INTEGRATION(resilience_outage, "resilience: an outage, then a server that forgot the session -> one re-authentication, and it beats on") {
  auto c = chtest::activated(kwtest::env("KW_OUTAGE_URL"), kwtest::takeKey("KW_KEYS_PLAIN"));
  chtest::Events ev;
  auto o = ev.options(200ms);
  o.reauth = true;
  auto hb = c.startHeartbeat("cpp-sdk-outage-01", "abcdef0123456789", o);
  CHECK(ev.waitFor([&] { return ev.beats.size() >= 1; }));
  auto last = hb.lastBeatAt();
  chtest::outage(1500);
  CHECK(ev.waitFor([&] { return ev.beats.size() >= 2; }, 30s));
  hb.stop();
  std::lock_guard<std::mutex> lk(ev.mu);
  CHECK_EQ(ev.beats[1].index, 1);  // the first beat of a new session
  CHECK_EQ(ev.beats[1].count, 1);
  CHECK_EQ(ev.recovered, 1);
  CHECK(!ev.killedWith.has_value());
  const auto& first = ev.degraded.front();
  CHECK(!first.lost && first.error.code() == ErrorCode::network && first.error.notSent());
  CHECK(first.lastBeatAt == last);
  const auto& final = ev.degraded.back();
  CHECK(final.lost && final.error.code() == ErrorCode::heartbeat_killed && final.error.status() == 403);
}

KW_INTEGRATION(resilience_banned, "resilience: an outage during which the key was banned -> the re-authentication fails with banned, once") {
  std::string key = kwtest::takeKey("KW_KEYS_PLAIN");
  auto c = chtest::activated(kwtest::env("KW_OUTAGE_URL"), key);
  chtest::Events ev;
  auto o = ev.options(200ms);
  o.reauth = true;
  auto hb = c.startHeartbeat("cpp-sdk-outage-02", "abcdef0123456789", o);
  CHECK(ev.waitFor([&] { return ev.beats.size() >= 1; }));
  chtest::outage(1500, key);
  CHECK(ev.waitFor([&] { return ev.killedWith.has_value(); }, 30s));
  std::lock_guard<std::mutex> lk(ev.mu);
  CHECK_EQ(ev.killedWith->code(), ErrorCode::banned);
  CHECK_EQ(ev.killedWith->status(), 403);
  CHECK_EQ(ev.killedWith->detailJson(), std::string("\"License key is banned\""));
  CHECK_EQ(ev.recovered, 0);
  CHECK(hb.state() == HeartbeatState::killed);
}
