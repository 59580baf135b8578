// The client against FakeServer: genuine answers are accepted; every hostile one is a typed error.
#include <algorithm>
#include <cctype>
#include <set>
#include <thread>

#include "crypto.hpp"
#include "runner.hpp"
#include "support.hpp"

namespace d = keywarden::detail;
using keywarden::ErrorCode;
using keywarden::HttpResponse;
using kwtest::FakeRequest;
using kwtest::FakeServer;

namespace {
keywarden::Options fast() {
  keywarden::Options o;
  o.retries = 0;
  o.timeout = std::chrono::milliseconds(500);
  return o;
}

/** Replaces the answer to `path` once the fake built it. */
void spoil(FakeServer& f, const std::string& path, std::function<HttpResponse(const FakeRequest&, FakeServer&)> make) {
  f.hook = [path, make](const FakeRequest& r, FakeServer& s) -> std::optional<HttpResponse> {
    if (r.path != path) return std::nullopt;
    return make(r, s);
  };
}

std::string nonceOf(const FakeRequest& r) { return r.headers.at("x-nonce"); }
}  // namespace

KW_TEST(genuine, "client/accepts genuine answers; a fresh X-Nonce on every call; no signature without a secret") {
  FakeServer f;
  auto c = f.client(fast());
  auto app = c.init();
  CHECK_EQ(app.name, std::string("fake"));
  CHECK_EQ(app.session.size(), std::size_t{43});
  CHECK_EQ(c.session(), app.session);
  auto lic = c.activateLicense("KEY-1");
  CHECK_EQ(lic.level, 3);
  CHECK(lic.expiresAt.has_value());
  CHECK_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(lic.expiresAt->time_since_epoch()).count(),
           std::int64_t{1893553445678});
  c.init();
  std::set<std::string> nonces;
  for (const auto& r : f.requests()) {
    std::string n = nonceOf(r);
    CHECK(n.size() >= 16 && n.size() <= 64);
    for (char ch : n) CHECK(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_');
    nonces.insert(n);
    CHECK(r.headers.count("x-signature") == 0);
    CHECK(r.headers.count("x-timestamp") == 0);
  }
  CHECK_EQ(nonces.size(), f.requests().size());
  // The license call carried the machine hwid, salted with the api_key.
  CHECK_EQ(f.requests()[1].body["hwid"].get<std::string>(), keywarden::machineHwid("0123456789abcdef0123456789abcdef"));
  CHECK_EQ(f.requests()[0].body["api_key"].get<std::string>(), std::string("0123456789abcdef0123456789abcdef"));
  CHECK(c.clockOffset().has_value());
}

KW_TEST(lifetime, "client/a lifetime license has no expiry") {
  FakeServer f;
  f.lifetimeLicense = true;
  auto c = f.client(fast());
  c.init();
  CHECK(!c.activateLicense("KEY-1").expiresAt.has_value());
}

KW_TEST(signed_requests, "client/signs every request when the config has an api_secret") {
  FakeServer f("kwsk_secret_for_tests");
  auto c = f.client(fast());
  c.init();
  c.activateLicense("KEY-1");
  for (const auto& r : f.requests()) {
    CHECK(r.headers.count("x-signature") == 1);
    CHECK_EQ(r.headers.at("x-signature"),
             d::requestSignature("kwsk_secret_for_tests", d::canonicalRequest("POST", r.path, r.headers.at("x-timestamp"),
                                                                              r.headers.at("x-nonce"), r.rawBody)));
  }
  // A wrong secret is refused by the server: clock_skew is what docs/protocol.md's 401 maps to.
  FakeServer g("the real secret");
  auto cfg = nlohmann::json::parse(g.configJson());
  cfg["api_secret"] = "a wrong secret";
  auto o = fast();
  o.transport = std::shared_ptr<keywarden::Transport>(&g, [](keywarden::Transport*) {});
  auto wrong = keywarden::Client::fromConfig(cfg.dump(), o);
  auto e = EXPECT_ERROR(wrong.init());
  CHECK_EQ(e.code(), ErrorCode::clock_skew);
  CHECK_EQ(e.status(), 401);
}

KW_TEST(tampered, "client/refuses unsigned, unknown kid, bad base64, bad signature, stale and foreign-nonce answers") {
  struct Mode {
    const char* reason;
    std::function<HttpResponse(const FakeRequest&, FakeServer&)> make;
  };
  const std::string body = R"({"success":true,"session":"SSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSSS","app":{"name":"evil"}})";
  std::vector<Mode> modes = {
      {"unsigned", [&](const FakeRequest&, FakeServer&) { HttpResponse r; r.status = 200; r.body = body; return r; }},
      {"unknown_kid", [&](const FakeRequest& q, FakeServer& s) { return s.signWith(q.path, 200, body, nonceOf(q), s.nowSeconds(), "k9", s.seed); }},
      {"bad_base64", [&](const FakeRequest& q, FakeServer& s) { auto r = s.signedAnswer(q, 200, body); r.headers["x-response-signature"] = "!!notbase64!!"; return r; }},
      {"bad_base64", [&](const FakeRequest& q, FakeServer& s) { auto r = s.signedAnswer(q, 200, body); r.headers["x-response-signature"] += "AA=="; return r; }},
      {"bad_signature", [&](const FakeRequest& q, FakeServer& s) { auto r = s.signedAnswer(q, 200, body); r.body[10] ^= 1; return r; }},
      {"bad_signature", [&](const FakeRequest& q, FakeServer& s) { return s.signWith(q.path, 200, body, nonceOf(q), s.nowSeconds(), "k1", d::sha256Raw("a forger's key")); }},
      {"bad_signature", [&](const FakeRequest& q, FakeServer& s) { return s.signWith(q.path, 200, body, "another-requests-nonce-000", s.nowSeconds(), "k1", s.seed); }},
      {"bad_signature", [&](const FakeRequest& q, FakeServer& s) { return s.signWith("/api/client/login", 200, body, nonceOf(q), s.nowSeconds(), "k1", s.seed); }},
      {"bad_signature", [&](const FakeRequest& q, FakeServer& s) { auto r = s.signedAnswer(q, 200, body); r.status = 201; return r; }},
      {"stale", [&](const FakeRequest& q, FakeServer& s) { return s.signWith(q.path, 200, body, nonceOf(q), s.nowSeconds() - 1000, "k1", s.seed); }},
      {"stale", [&](const FakeRequest& q, FakeServer& s) { auto r = s.signedAnswer(q, 200, body); r.headers["x-response-timestamp"] = "12e9"; return r; }},
  };
  for (const auto& m : modes) {
    FakeServer f;
    spoil(f, "/api/client/init", m.make);
    auto c = f.client(fast());
    auto e = EXPECT_ERROR(c.init());
    CHECK_EQ(e.code(), ErrorCode::verification);
    CHECK_MSG(e.reason() == m.reason, std::string("expected ") + m.reason + ", got " + e.reason());
    CHECK(c.session().empty());  // nothing of the answer was believed
  }
}

KW_TEST(replayed, "client/refuses an answer replayed from an earlier request") {
  FakeServer f;
  std::optional<HttpResponse> captured;
  f.after = [&](const FakeRequest& r, const HttpResponse& res) {
    if (r.path == "/api/client/init" && !captured) captured = res;
  };
  auto c = f.client(fast());
  c.init();
  f.hook = [&](const FakeRequest&, FakeServer&) { return captured; };
  auto e = EXPECT_ERROR(c.init());
  CHECK_EQ(e.code(), ErrorCode::verification);
  CHECK_EQ(e.reason(), std::string("bad_signature"));
}

KW_TEST(malformed, "client/a signed but malformed answer is verification(malformed), never a crash") {
  const std::vector<std::string> bodies = {
      "{not json", "[1,2,3]", "\"text\"", "", "{\"success\":false}", "{\"success\":\"true\"}",
      "{\"success\":true}",  // init without session and app
      "{\"success\":true,\"session\":5,\"app\":{\"name\":\"x\"}}",
      "{\"success\":true,\"session\":\"s\",\"app\":\"x\"}",
      std::string(200000, '['),
  };
  for (const auto& body : bodies) {
    FakeServer f;
    spoil(f, "/api/client/init", [&](const FakeRequest& q, FakeServer& s) { return s.signedAnswer(q, 200, body); });
    auto e = EXPECT_ERROR(f.client(fast()).init());
    CHECK_EQ(e.code(), ErrorCode::verification);
    CHECK_MSG(e.reason() == "malformed", body.substr(0, 40));
  }
  // Malformed success bodies of the other calls.
  FakeServer f;
  auto c = f.client(fast());
  c.init();
  spoil(f, "/api/client/license", [](const FakeRequest& q, FakeServer& s) { return s.signedAnswer(q, 200, R"({"success":true,"level":"3"})"); });
  CHECK_EQ(EXPECT_ERROR(c.activateLicense("K")).reason(), std::string("malformed"));
  spoil(f, "/api/client/login", [](const FakeRequest& q, FakeServer& s) { return s.signedAnswer(q, 200, R"({"success":true,"user":null})"); });
  CHECK_EQ(EXPECT_ERROR(c.login("u", "p")).reason(), std::string("malformed"));
  spoil(f, "/api/client/heartbeat/start", [](const FakeRequest& q, FakeServer& s) { return s.signedAnswer(q, 200, R"({"success":true,"token":"TT"})"); });
  CHECK_EQ(EXPECT_ERROR(c.startHeartbeat("system-0001", "code-hash-0001")).reason(), std::string("malformed"));
  // An error answer without a detail is still a typed error.
  spoil(f, "/api/client/license", [](const FakeRequest& q, FakeServer& s) { return s.signedAnswer(q, 502, "{}"); });
  auto e = EXPECT_ERROR(c.activateLicense("K"));
  CHECK_EQ(e.code(), ErrorCode::server);
  CHECK_EQ(e.status(), 502);
}

KW_TEST(answers, "client/verified failure answers become their codes, with their data") {
  FakeServer f;
  auto c = f.client(fast());
  c.init();
  spoil(f, "/api/client/license", [](const FakeRequest& q, FakeServer& s) {
    return s.signedAnswer(q, 429, R"({"detail":"Rate limit exceeded"})", {{"retry-after", "42"}});
  });
  auto e = EXPECT_ERROR(c.activateLicense("K"));
  CHECK_EQ(e.code(), ErrorCode::rate_limited);
  CHECK(e.retryAfter() == 42);
  CHECK_EQ(e.status(), 429);
  spoil(f, "/api/client/license", [](const FakeRequest& q, FakeServer& s) {
    return s.signedAnswer(q, 403, R"({"detail":"HWID mismatch. Key locked to another device."})");
  });
  CHECK_EQ(EXPECT_ERROR(c.activateLicense("K")).code(), ErrorCode::hwid_mismatch);
  spoil(f, "/api/client/init", [](const FakeRequest& q, FakeServer& s) {
    return s.signedAnswer(q, 426, R"({"detail":{"message":"Get 2.0","latest_version":"2.0","update_url":"https://u.test/2.0","force_update":true}})");
  });
  e = EXPECT_ERROR(c.init());
  CHECK_EQ(e.code(), ErrorCode::update_required);
  CHECK_EQ(e.latestVersion(), std::string("2.0"));
  CHECK_EQ(e.updateUrl(), std::string("https://u.test/2.0"));
  spoil(f, "/api/client/init", [](const FakeRequest& q, FakeServer& s) {
    return s.signedAnswer(q, 403, R"({"detail":"Closed for maintenance"})");
  });
  e = EXPECT_ERROR(c.init());
  CHECK_EQ(e.code(), ErrorCode::app_disabled);
  CHECK_EQ(e.detailJson(), std::string("\"Closed for maintenance\""));
}

KW_TEST(session_first, "client/calls before init are session_expired, without a request") {
  FakeServer f;
  auto c = f.client(fast());
  CHECK_EQ(EXPECT_ERROR(c.activateLicense("K")).code(), ErrorCode::session_expired);
  CHECK_EQ(EXPECT_ERROR(c.login("u", "p")).code(), ErrorCode::session_expired);
  CHECK(f.requests().empty());
}

KW_TEST(clock_offset, "client/learns the server clock from the first answer, then holds later answers to it") {
  FakeServer f;
  f.clockOffsetSeconds = 500;  // our clock is 500 s behind the server's
  auto c = f.client(fast());
  c.init();
  auto off = c.clockOffset();
  CHECK(off.has_value());
  CHECK(off->count() > 498000 && off->count() < 502000);
  c.activateLicense("K");  // still fine: checked against local + offset
  f.clockOffsetSeconds = 500 + 400;  // the server's clock jumps: answers are now 400 s off the learned time
  auto e = EXPECT_ERROR(c.init());
  CHECK_EQ(e.reason(), std::string("stale"));
  // Further off than maxClockOffset (600 s) on the first answer: refused.
  FakeServer g;
  g.clockOffsetSeconds = -1000;
  CHECK_EQ(EXPECT_ERROR(g.client(fast()).init()).reason(), std::string("stale"));
  // An injected clock is what the client believes.
  FakeServer h;
  auto o = fast();
  o.clock = [] { return std::chrono::system_clock::now() + std::chrono::seconds(5000); };
  CHECK_EQ(EXPECT_ERROR(h.client(o).init()).reason(), std::string("stale"));
  o.maxClockOffset = std::chrono::seconds(6000);
  auto lenient = h.client(o);
  lenient.init();
  CHECK(lenient.clockOffset()->count() < -4990000);
}

KW_TEST(clock_skew_retry, "client/a signed request refused for our clock is sent again once with the learned offset") {
  FakeServer f("secret-1");
  f.clockOffsetSeconds = 400;  // our timestamps are 400 s behind: the server refuses them
  auto c = f.client(fast());
  c.init();
  auto paths = f.paths();
  CHECK_EQ(paths.size(), std::size_t{2});  // refused, learned, resent
  CHECK(f.requests()[0].headers.at("x-nonce") != f.requests()[1].headers.at("x-nonce"));
  c.activateLicense("K");
  CHECK_EQ(f.paths().size(), std::size_t{3});  // no more retries needed
  // A clock too far off for the window is refused as stale, and not retried blindly.
  FakeServer g("secret-1");
  g.clockOffsetSeconds = 4000;
  auto e = EXPECT_ERROR(g.client(fast()).init());
  CHECK_EQ(e.reason(), std::string("stale"));
  CHECK_EQ(g.paths().size(), std::size_t{1});
}

KW_TEST(transport_errors, "client/network, timeout and exotic transport failures are typed; only unsent calls are resent") {
  using keywarden::TransportError;
  FakeServer f;
  int attempts = 0;
  f.hook = [&](const FakeRequest&, FakeServer&) -> std::optional<HttpResponse> {
    ++attempts;
    throw TransportError(TransportError::Kind::network, false, "connection refused");
  };
  auto o = fast();
  o.retries = 2;
  auto e = EXPECT_ERROR(f.client(o).init());
  CHECK_EQ(e.code(), ErrorCode::network);
  CHECK(e.notSent());
  CHECK_EQ(attempts, 3);
  // Unsent once, then answered: the caller never notices.
  attempts = 0;
  f.hook = [&](const FakeRequest&, FakeServer&) -> std::optional<HttpResponse> {
    if (++attempts == 1) throw TransportError(TransportError::Kind::network, false, "connection refused");
    return std::nullopt;
  };
  CHECK_EQ(f.client(o).init().name, std::string("fake"));
  CHECK_EQ(attempts, 2);
  // Sent (may have reached the server): never resent.
  attempts = 0;
  f.hook = [&](const FakeRequest&, FakeServer&) -> std::optional<HttpResponse> {
    ++attempts;
    throw TransportError(TransportError::Kind::timeout, true, "no answer");
  };
  e = EXPECT_ERROR(f.client(o).init());
  CHECK_EQ(e.code(), ErrorCode::timeout);
  CHECK(!e.notSent());
  CHECK_EQ(attempts, 1);
  f.hook = [&](const FakeRequest&, FakeServer&) -> std::optional<HttpResponse> { throw std::runtime_error("boom"); };
  CHECK_EQ(EXPECT_ERROR(f.client(o).init()).code(), ErrorCode::network);
  f.hook = [&](const FakeRequest&, FakeServer&) -> std::optional<HttpResponse> { throw 42; };
  CHECK_EQ(EXPECT_ERROR(f.client(o).init()).code(), ErrorCode::network);
}

KW_TEST(route_drop, "client/the route is dropped after a 502/503/504 (signed or not), a timeout or a connection error") {
  using keywarden::TransportError;
  FakeServer f;
  // One step per call after init: an answer (status, the route it names, signed or not) or a failure on the way.
  struct Step {
    int status;
    std::string route;
    bool sign;
    std::optional<TransportError::Kind> fail;
  };
  std::vector<Step> steps = {
      {401, "a-0", true, {}},
      {503, "a-0", true, {}},  // a signed 503: dropped, even though it names one
      {401, "b-1", true, {}},
      {502, "", false, {}},  // a balancer's own 502
      {401, "b-1", true, {}},
      {504, "b-1", true, {}},
      {401, "b-0", true, {}},
      {0, "", false, TransportError::Kind::timeout},
      {401, "b-1", true, {}},
      {0, "", false, TransportError::Kind::network},  // the connection dropped after the request left
      {401, "b-0", true, {}},
      {401, "", true, {}},
  };
  std::size_t next = 0;
  f.hook = [&](const FakeRequest& r, FakeServer& s) -> std::optional<HttpResponse> {
    if (r.path == "/api/client/init") return std::nullopt;
    const Step& step = steps.at(next++);
    if (step.fail) throw TransportError(*step.fail, true, "failed on the way");
    if (!step.sign) {
      HttpResponse plain;
      plain.status = step.status;
      plain.body = "<html>bad gateway</html>";
      return plain;
    }
    std::map<std::string, std::string> extra;
    if (!step.route.empty()) extra["x-keywarden-route"] = step.route;
    return s.signedAnswer(r, step.status, R"({"detail":"x"})", extra);
  };
  auto c = f.client(fast());
  c.init();
  while (next < steps.size()) EXPECT_ERROR(c.activateLicense("KEY", "hwid"));
  std::vector<std::string> sent;
  for (const auto& r : f.requests()) {
    auto h = r.headers.find("x-keywarden-route");
    sent.push_back(h == r.headers.end() ? "-" : h->second);
  }
  std::string joined;
  for (const auto& x : sent) joined += (joined.empty() ? "" : ",") + x;
  CHECK_EQ(joined, std::string("-,-,a-0,-,b-1,-,b-1,-,b-0,-,b-1,-,b-0"));
}

KW_TEST(register_login, "client/registerUser logs in right after, and ignores that login's failure") {
  FakeServer f;
  auto c = f.client(fast());
  c.init();
  auto u = c.registerUser("alice", "pw-1", "KEY-1", "hwid-0000001");
  CHECK_EQ(u.username, std::string("alice"));
  CHECK_EQ(u.level, 2);
  auto paths = f.paths();
  CHECK_EQ(paths.size(), std::size_t{3});
  CHECK_EQ(paths[1], std::string("/api/client/register"));
  CHECK_EQ(paths[2], std::string("/api/client/login"));
  CHECK_EQ(f.requests()[2].body["hwid"].get<std::string>(), std::string("hwid-0000001"));
  f.failLogin = true;
  std::vector<std::string> events;
  auto o = fast();
  o.logger = [&](keywarden::LogLevel, const std::string& event, const std::string&) { events.push_back(event); };
  auto c2 = f.client(o);
  c2.init();
  CHECK_EQ(c2.registerUser("bob", "pw-2", "KEY-2").username, std::string("bob"));
  CHECK(std::find(events.begin(), events.end(), "keywarden.register.login_failed") != events.end());
  CHECK_EQ(EXPECT_ERROR(c2.login("bob", "pw-2")).code(), ErrorCode::invalid_key);
}

KW_TEST(encryption_e2e, "client/decrypts {\"enc\":...} bodies and refuses ones that do not decrypt") {
  FakeServer f("secret-for-enc");
  auto o = fast();
  o.encKey = "client-enc-key";
  auto c = f.client(o);
  c.init();
  auto lic = c.activateLicense("K");
  CHECK_EQ(lic.level, 3);
  auto reqs = f.requests();
  CHECK_EQ(reqs[0].body["enc_key"].get<std::string>(), std::string("client-enc-key"));
  CHECK(reqs[1].body.contains("init_iv"));
  CHECK(reqs[0].body["init_iv"] != reqs[1].body["init_iv"]);
  spoil(f, "/api/client/license", [](const FakeRequest& q, FakeServer& s) {
    return s.signedAnswer(q, 200, R"({"enc":"AAAAAAAAAAAAAAAAAAAAAA=="})");
  });
  auto e = EXPECT_ERROR(c.activateLicense("K"));
  CHECK_EQ(e.reason(), std::string("malformed"));
}

KW_TEST(throwing_logger, "client/a logger that throws does not break a call") {
  FakeServer f("s");
  f.clockOffsetSeconds = 400;  // makes the client log (clock offset) and retry
  auto o = fast();
  o.logger = [](keywarden::LogLevel, const std::string&, const std::string&) { throw std::runtime_error("logger down"); };
  CHECK_EQ(f.client(o).init().name, std::string("fake"));
}

KW_TEST(concurrency, "client/one client used from several threads at once") {
  FakeServer f;
  auto c = f.client(fast());
  c.init();
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      for (int j = 0; j < 10; ++j) {
        try {
          if (c.activateLicense("K").level == 3) ++ok;
        } catch (...) {
        }
      }
    });
  for (auto& t : threads) t.join();
  CHECK_EQ(ok.load(), 40);
}
