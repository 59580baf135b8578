// The heartbeat thread against FakeServer: proofs, resend of unsent beats, lost beats, re-authentication, kills.
#include <algorithm>
#include <condition_variable>
#include <thread>

#include "crypto.hpp"
#include "heartbeat-events.hpp"
#include "runner.hpp"
#include "support.hpp"

using keywarden::ErrorCode;
using keywarden::HttpResponse;
using keywarden::TransportError;
using kwtest::FakeRequest;
using kwtest::FakeServer;
using kwtest::HeartbeatEvents;
using namespace std::chrono_literals;

namespace {

keywarden::Client licensed(FakeServer& f) {
  keywarden::Options o;
  o.retries = 2;
  o.timeout = 500ms;
  auto c = f.client(o);
  c.init();
  c.activateLicense("KEY-1", "hwid-00000001");
  return c;
}

std::vector<FakeRequest> beats(const FakeServer& f) {
  std::vector<FakeRequest> out;
  for (const auto& r : f.requests())
    if (r.path == "/api/client/heartbeat") out.push_back(r);
  return out;
}

}  // namespace

KW_TEST(hb_beats, "heartbeat/beats with verified proofs, then stop closes the session") {
  FakeServer f;
  auto c = licensed(f);
  HeartbeatEvents ev;
  auto hb = c.startHeartbeat("system-0001", "code-hash-0001", ev.options());
  CHECK(hb.running());
  CHECK_EQ(hb.beatInterval().count(), 5);
  CHECK(hb.waitForBeats(3, 5s));
  hb.stop();
  CHECK(!hb.running());
  CHECK(!hb.killed());
  auto log = ev.snapshot();
  CHECK_EQ(log[0], std::string("beat 1"));
  CHECK_EQ(log[1], std::string("beat 2"));
  CHECK_EQ(log[2], std::string("beat 3"));
  CHECK_EQ(log.back(), std::string("stopped stop"));
  auto b = beats(f);
  for (std::size_t i = 0; i < b.size(); ++i) {
    CHECK_EQ(b[i].body["beat_index"].get<std::int64_t>(), static_cast<std::int64_t>(i + 1));
    CHECK_EQ(b[i].body["system_id"].get<std::string>(), std::string("system-0001"));
    CHECK_EQ(b[i].body["code_hash"].get<std::string>(), std::string("code-hash-0001"));
    CHECK_EQ(b[i].body["debugger_detected"].get<bool>(), false);
  }
  CHECK_EQ(f.paths().back(), std::string("/api/client/heartbeat/stop"));  // accepted: the fake checks the token
  hb.stop();  // idempotent
}

KW_TEST(hb_defaults, "heartbeat/systemId and codeHash default to the machine hwid and selfHash()") {
  FakeServer f;
  auto c = licensed(f);
  HeartbeatEvents ev;
  auto hb = c.startHeartbeat({}, {}, ev.options());
  CHECK(hb.waitForBeats(1, 5s));
  hb.stop();
  auto b = beats(f);
  CHECK_EQ(b[0].body["system_id"].get<std::string>(), c.machineHwid());
  CHECK_EQ(b[0].body["code_hash"].get<std::string>(), keywarden::selfHash());
}

KW_TEST(hb_start_proof, "heartbeat/a heartbeat/start whose proof does not verify is refused: the token is never trusted") {
  FakeServer f;
  f.spoilStartProof = true;
  auto c = licensed(f);
  auto e = EXPECT_ERROR(c.startHeartbeat("system-0001", "code-hash-0001"));
  CHECK_EQ(e.code(), ErrorCode::verification);
  CHECK_EQ(e.reason(), std::string("bad_proof"));
  CHECK(beats(f).empty());
}

KW_TEST(hb_beat_proof, "heartbeat/a beat whose proof does not verify: degraded, the new token is not used") {
  FakeServer f;
  auto c = licensed(f);
  HeartbeatEvents ev;
  auto hb = c.startHeartbeat("system-0001", "code-hash-0001", ev.options());
  CHECK(hb.waitForBeats(1, 5s));
  f.spoilBeatProof = true;
  CHECK(ev.waitFor("degraded lost", 5s));
  CHECK(ev.waitFor("killed", 5s));  // the next beat used the old token: the server refused it
  {
    std::lock_guard<std::mutex> lk(ev.mu);
    CHECK_EQ(ev.degraded[0].error.reason(), std::string("bad_proof"));
    CHECK_EQ(ev.killedWith->code(), ErrorCode::heartbeat_killed);
  }
  auto b = beats(f);
  CHECK(b.size() >= 3);
  CHECK_EQ(b[2].body["token"].get<std::string>(), b[1].body["token"].get<std::string>());
  CHECK_EQ(b[2].body["beat_index"].get<std::int64_t>(), std::int64_t{3});
  hb.stop();
}

KW_TEST(hb_unsent, "heartbeat/a beat that never reached the server is resent with the same index and token") {
  FakeServer f;
  auto c = licensed(f);
  HeartbeatEvents ev;
  std::atomic<int> beatCalls{0};
  f.hook = [&](const FakeRequest& r, FakeServer&) -> std::optional<HttpResponse> {
    if (r.path == "/api/client/heartbeat" && ++beatCalls == 2)
      throw TransportError(TransportError::Kind::network, false, "connection refused");
    return std::nullopt;
  };
  auto hb = c.startHeartbeat("system-0001", "code-hash-0001", ev.options());
  CHECK(hb.waitForBeats(3, 10s));
  hb.stop();
  auto b = beats(f);
  CHECK_EQ(b[1].body["beat_index"].get<std::int64_t>(), std::int64_t{2});
  CHECK_EQ(b[2].body["beat_index"].get<std::int64_t>(), std::int64_t{2});
  CHECK_EQ(b[1].body["token"].get<std::string>(), b[2].body["token"].get<std::string>());
  CHECK(b[1].headers.at("x-nonce") != b[2].headers.at("x-nonce"));
  auto log = ev.snapshot();
  CHECK(std::find_if(log.begin(), log.end(), [](const std::string& s) { return s.rfind("degraded", 0) == 0; }) == log.end());
}

KW_TEST(hb_lost, "heartbeat/a lost answer without reauth: degraded(lost), then the next index with the old token") {
  FakeServer f;
  auto c = licensed(f);
  HeartbeatEvents ev;
  std::atomic<int> beatCalls{0};
  // The server never sees beat 2 here (dropped on the way out, but the client cannot know): the
  // next index with the old token then works, as the heartbeat's comment says.
  f.hook = [&](const FakeRequest& r, FakeServer&) -> std::optional<HttpResponse> {
    if (r.path == "/api/client/heartbeat" && ++beatCalls == 2)
      throw TransportError(TransportError::Kind::timeout, true, "no answer in time");
    return std::nullopt;
  };
  auto hb = c.startHeartbeat("system-0001", "code-hash-0001", ev.options());
  CHECK(hb.waitForBeats(3, 10s));
  hb.stop();
  auto b = beats(f);
  CHECK_EQ(b[2].body["beat_index"].get<std::int64_t>(), std::int64_t{3});  // index 2 is burnt
  CHECK_EQ(b[2].body["token"].get<std::string>(), b[1].body["token"].get<std::string>());
  std::lock_guard<std::mutex> lk(ev.mu);
  CHECK_EQ(ev.degraded.size(), std::size_t{1});
  CHECK(ev.degraded[0].lost);
  CHECK(!ev.degraded[0].reauthenticating);
  CHECK_EQ(ev.degraded[0].error.code(), ErrorCode::timeout);
}

KW_TEST(hb_reauth, "heartbeat/a lost answer with reauth: init, the same license, heartbeat/start again, beats go on") {
  FakeServer f;
  auto c = licensed(f);
  HeartbeatEvents ev;
  std::atomic<int> beatCalls{0};
  // This time the server DID process beat 2 and only the answer was lost: the old token is dead.
  f.after = [&](const FakeRequest& r, const HttpResponse&) {
    if (r.path == "/api/client/heartbeat" && ++beatCalls == 2)
      throw TransportError(TransportError::Kind::network, true, "connection reset");
  };
  auto o = ev.options();
  o.reauth = true;
  auto hb = c.startHeartbeat("system-0001", "code-hash-0001", o);
  CHECK(ev.waitFor("recovered", 10s));
  CHECK(hb.waitForBeats(3, 10s));
  hb.stop();
  auto paths = f.paths();
  std::vector<std::string> afterLoss;
  int seen = 0;
  for (const auto& p : paths) {
    if (p == "/api/client/heartbeat") ++seen;
    else if (seen >= 2) afterLoss.push_back(p);
    if (afterLoss.size() == 3) break;
  }
  CHECK_EQ(afterLoss.size(), std::size_t{3});
  CHECK_EQ(afterLoss[0], std::string("/api/client/init"));
  CHECK_EQ(afterLoss[1], std::string("/api/client/license"));
  CHECK_EQ(afterLoss[2], std::string("/api/client/heartbeat/start"));
  for (const auto& r : f.requests())
    if (r.path == "/api/client/license") CHECK_EQ(r.body["license"].get<std::string>(), std::string("KEY-1"));
  auto b = beats(f);
  CHECK_EQ(b.back().body["session"].get<std::string>(), c.session());  // beating on the new session
  auto log = ev.snapshot();
  CHECK(std::find(log.begin(), log.end(), "killed") == log.end());
  std::lock_guard<std::mutex> lk(ev.mu);
  CHECK(ev.degraded[0].lost && ev.degraded[0].reauthenticating);
}

KW_TEST(hb_reauth_custom, "heartbeat/a custom re-authentication callback is used instead of the remembered activation") {
  FakeServer f;
  auto c = licensed(f);
  HeartbeatEvents ev;
  std::atomic<int> beatCalls{0};
  std::atomic<int> custom{0};
  f.after = [&](const FakeRequest& r, const HttpResponse&) {
    if (r.path == "/api/client/heartbeat" && ++beatCalls == 1)
      throw TransportError(TransportError::Kind::network, true, "connection reset");
  };
  auto o = ev.options();
  o.reauthWith = [&](keywarden::Client& cl) {
    ++custom;
    cl.init();
    cl.login("alice", "pw", "hwid-00000001");
  };
  auto hb = c.startHeartbeat("system-0001", "code-hash-0001", o);
  CHECK(ev.waitFor("recovered", 10s));
  CHECK(hb.waitForBeats(1, 10s));
  hb.stop();
  CHECK_EQ(custom.load(), 1);
  auto paths = f.paths();
  CHECK(std::find(paths.begin(), paths.end(), "/api/client/login") != paths.end());
}

KW_TEST(hb_killed, "heartbeat/a debugger report is killed by the server: heartbeat_killed, then stopped") {
  FakeServer f;
  auto c = licensed(f);
  HeartbeatEvents ev;
  auto o = ev.options();
  o.debuggerDetected = [] { return true; };
  auto hb = c.startHeartbeat("system-0001", "code-hash-0001", o);
  CHECK(hb.waitUntilEnded(5s));
  CHECK(hb.killed());
  CHECK(!hb.running());
  auto log = ev.snapshot();
  CHECK_EQ(log.size(), std::size_t{2});
  CHECK_EQ(log[0], std::string("killed"));
  CHECK_EQ(log[1], std::string("stopped killed"));
  CHECK_EQ(ev.killedWith->code(), ErrorCode::heartbeat_killed);
  hb.stop();  // after a kill: no heartbeat/stop is sent
  CHECK(f.paths().back() != std::string("/api/client/heartbeat/stop"));
}

KW_TEST(hb_throwing_callbacks, "heartbeat/callbacks that throw do not end the loop or reach the host") {
  FakeServer f;
  auto c = licensed(f);
  keywarden::HeartbeatOptions o;
  o.interval = 30ms;
  o.debuggerDetected = [] { return false; };
  o.onBeat = [](const keywarden::BeatEvent&) { throw std::runtime_error("listener bug"); };
  o.onStopped = [](const keywarden::StoppedEvent&) { throw 7; };
  auto hb = c.startHeartbeat("system-0001", "code-hash-0001", o);
  CHECK(hb.waitForBeats(3, 5s));
  hb.stop();
  CHECK(!hb.running());
}

KW_TEST(hb_stop_inside_callback, "heartbeat/stop() from inside a callback neither deadlocks nor throws") {
  FakeServer f;
  auto c = licensed(f);
  HeartbeatEvents ev;
  auto o = ev.options(30ms);
  keywarden::Heartbeat* self = nullptr;
  std::mutex selfMu;
  o.onBeat = [&](const keywarden::BeatEvent& e) {
    ev.add("beat " + std::to_string(e.index));
    std::lock_guard<std::mutex> lk(selfMu);
    if (self) self->stop();
  };
  auto hb = c.startHeartbeat("system-0001", "code-hash-0001", o);
  {
    std::lock_guard<std::mutex> lk(selfMu);
    self = &hb;
  }
  CHECK(ev.waitFor("stopped stop", 5s));
  CHECK(!hb.running());
  hb.stop();
}

KW_TEST(hb_rate_limited_beat, "heartbeat/a 429 on a beat is not a lost beat: the same index is used again") {
  FakeServer f;
  auto c = licensed(f);
  HeartbeatEvents ev;
  std::atomic<int> beatCalls{0};
  f.hook = [&](const FakeRequest& r, FakeServer& s) -> std::optional<HttpResponse> {
    if (r.path == "/api/client/heartbeat" && ++beatCalls == 1)
      return s.signedAnswer(r, 429, R"({"detail":"Rate limit exceeded"})", {{"retry-after", "1"}});
    return std::nullopt;
  };
  auto hb = c.startHeartbeat("system-0001", "code-hash-0001", ev.options());
  CHECK(hb.waitForBeats(1, 5s));
  hb.stop();
  auto b = beats(f);
  CHECK_EQ(b[0].body["beat_index"].get<std::int64_t>(), std::int64_t{1});
  CHECK_EQ(b[1].body["beat_index"].get<std::int64_t>(), std::int64_t{1});
  std::lock_guard<std::mutex> lk(ev.mu);
  CHECK(!ev.degraded.empty());
  CHECK(!ev.degraded[0].lost);
}

KW_TEST(hb_setters, "heartbeat/callbacks can be set on the running heartbeat object") {
  FakeServer f;
  auto c = licensed(f);
  keywarden::HeartbeatOptions o;
  o.interval = 30ms;
  o.debuggerDetected = [] { return false; };
  auto hb = c.startHeartbeat("system-0001", "code-hash-0001", o);
  HeartbeatEvents ev;
  hb.onBeat([&](const keywarden::BeatEvent& e) { ev.add("beat " + std::to_string(e.index)); });
  hb.onStopped([&](const keywarden::StoppedEvent& e) { ev.add("stopped " + e.reason); });
  std::int64_t from = hb.lastIndex() + 2;  // a beat may have happened before onBeat was set
  CHECK(ev.waitFor("beat " + std::to_string(from), 5s));
  hb.stop();
  CHECK(ev.waitFor("stopped stop", 1s));
}
