// The libcurl transport against real sockets on 127.0.0.1: what reached the server and what did
// not, timeouts on a hung server, oversized and broken answers. POSIX sockets (Linux, macOS).
#include "runner.hpp"
#include "support.hpp"

#if !defined(_WIN32)
#include "socket-server.hpp"

using keywarden::ErrorCode;
using keywarden::TransportError;
using kwtest::closedPort;
using kwtest::readRequest;
using kwtest::sendAll;
using kwtest::SocketServer;
using namespace std::chrono_literals;

namespace {

keywarden::HttpRequest post(const std::string& url, std::chrono::milliseconds timeout = 2000ms) {
  keywarden::HttpRequest r;
  r.method = "POST";
  r.url = url + "/api/client/init";
  r.headers = {{"Content-Type", "application/json"}, {"X-Nonce", "nonce-nonce-nonce-1"}};
  r.body = R"({"api_key":"x"})";
  r.timeout = timeout;
  return r;
}

TransportError transportFailure(const keywarden::HttpRequest& r) {
  try {
    keywarden::makeCurlTransport()->send(r);
  } catch (const TransportError& e) {
    return e;
  }
  kwtest::fail(__FILE__, __LINE__, "expected a TransportError");
}

}  // namespace

KW_TEST(curl_answer, "transport/curl: status, lower-cased headers and body of a real answer; the request as sent") {
  std::string seen;
  SocketServer s([&](int c) {
    seen = readRequest(c);
    sendAll(c, "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nX-Response-Kid: k1\r\nX-Multi: a\r\n"
               "X-Multi: b\r\nContent-Length: 12\r\nConnection: close\r\n\r\n{\"detail\":1}");
  });
  auto res = keywarden::makeCurlTransport()->send(post(s.url()));
  CHECK_EQ(res.status, 401);
  CHECK_EQ(res.body, std::string("{\"detail\":1}"));
  CHECK_EQ(res.headers.at("x-response-kid"), std::string("k1"));
  CHECK_EQ(res.headers.at("x-multi"), std::string("a, b"));
  CHECK(seen.rfind("POST /api/client/init HTTP/1.1\r\n", 0) == 0);
  CHECK(seen.find("X-Nonce: nonce-nonce-nonce-1\r\n") != std::string::npos);
  CHECK(seen.find("Expect:") == std::string::npos);
  CHECK(seen.find("\r\n\r\n{\"api_key\":\"x\"}") != std::string::npos);
}

KW_TEST(curl_refused, "transport/curl: a refused connection is network and certainly not sent; the client resends it") {
  std::string url = "http://127.0.0.1:" + std::to_string(closedPort());
  auto e = transportFailure(post(url));
  CHECK(e.kind() == TransportError::Kind::network);
  CHECK(!e.sent());
  kwtest::FakeServer f;  // only for its config (keys); the default curl transport is used
  keywarden::Options o;
  o.baseUrl = url;
  o.retries = 1;
  auto c = keywarden::Client::fromConfig(f.configJson(), o);
  auto err = EXPECT_ERROR(c.init());
  CHECK_EQ(err.code(), ErrorCode::network);
  CHECK(err.notSent());
}

KW_TEST(curl_hung, "transport/curl: a hung server is a timeout after the request was sent (never resent)") {
  std::atomic<bool> release{false};
  SocketServer s([&](int c) {
    readRequest(c);
    for (int i = 0; i < 300 && !release; ++i) std::this_thread::sleep_for(10ms);  // never answers in time
  });
  auto start = std::chrono::steady_clock::now();
  auto e = transportFailure(post(s.url(), 300ms));
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(e.kind() == TransportError::Kind::timeout);
  CHECK(e.sent());
  CHECK(took < 2s);
  kwtest::FakeServer f;
  keywarden::Options o;
  o.baseUrl = s.url();
  o.timeout = 300ms;
  o.retries = 3;
  auto err = EXPECT_ERROR(keywarden::Client::fromConfig(f.configJson(), o).init());
  release = true;
  CHECK_EQ(err.code(), ErrorCode::timeout);
  CHECK(!err.notSent());
  // Every connection the client made is in the backlog by now (init() returned): let the server drain it.
  for (int i = 0; i < 300 && s.accepted() < 2; ++i) std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(100ms);
  CHECK_EQ(s.accepted(), 2);  // one per call: the client's timed-out call was not resent
}

KW_TEST(curl_broken, "transport/curl: a connection closed mid-answer and an oversized answer are network errors") {
  SocketServer s([&](int c) {
    readRequest(c);
    sendAll(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"succ");
  });
  auto e = transportFailure(post(s.url()));
  CHECK(e.kind() == TransportError::Kind::network);
  CHECK(e.sent());
  SocketServer big([&](int c) {
    readRequest(c);
    std::string body(2u << 20, 'x');
    sendAll(c, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  });
  e = transportFailure(post(big.url()));
  CHECK(e.kind() == TransportError::Kind::network);
  CHECK(std::string(e.what()).find("larger than") != std::string::npos);
  SocketServer garbage([&](int c) {
    readRequest(c);
    sendAll(c, "this is not http\r\n\r\n");
  });
  e = transportFailure(post(garbage.url()));
  CHECK(e.kind() == TransportError::Kind::network);
}

KW_TEST(curl_unsigned_via_client, "transport/curl: a real unsigned HTTP answer is refused by the client") {
  SocketServer s([&](int c) {
    readRequest(c);
    std::string body = R"({"success":true,"session":"x","app":{"name":"evil"}})";
    sendAll(c, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
  });
  kwtest::FakeServer f;
  keywarden::Options o;
  o.baseUrl = s.url();
  auto err = EXPECT_ERROR(keywarden::Client::fromConfig(f.configJson(), o).init());
  CHECK_EQ(err.code(), ErrorCode::verification);
  CHECK_EQ(err.reason(), std::string("unsigned"));
}

KW_TEST(curl_proxy, "transport/curl: goes through an HTTP proxy when told to") {
  std::string seen;
  SocketServer proxy([&](int c) {
    seen = readRequest(c);
    sendAll(c, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
  });
  keywarden::CurlTransportOptions o;
  o.proxy = proxy.url();
  auto res = keywarden::makeCurlTransport(o)->send(post("http://keywarden.example.test:8080"));
  CHECK_EQ(res.status, 204);
  CHECK(seen.rfind("POST http://keywarden.example.test:8080/api/client/init HTTP/1.1\r\n", 0) == 0);
}
#endif
