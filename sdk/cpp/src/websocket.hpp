// A minimal RFC 6455 client for the realtime channel over the connection libcurl opens with
// CURLOPT_CONNECT_ONLY (plain or TLS, the CA bundle of the client's options): the upgrade, masked
// client frames, fragments, ping/pong, close, a size cap, and one reader thread. libcurl's own
// WebSocket API is not used: Debian 12's libcurl 7.88 is built without it (ws/wss are missing from
// its protocols), and it is experimental there.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace keywarden::detail {

struct UpgradeRefusal {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-cased names
  std::string body;
};

class WebSocket {
 public:
  using Headers = std::vector<std::pair<std::string, std::string>>;
  /**
   * Connects and upgrades within `timeout`. Returns the socket, or nullptr with *refusal filled
   * when the server answered plain HTTP. Throws std::runtime_error when there is no answer at all.
   */
  static std::shared_ptr<WebSocket> open(const std::string& url, const Headers& headers, std::chrono::milliseconds timeout,
                                         const std::string& caBundle, UpgradeRefusal* refusal);
  ~WebSocket();
  WebSocket(const WebSocket&) = delete;
  WebSocket& operator=(const WebSocket&) = delete;

  /** One whole message within `timeout`, on the calling thread (the hello). Throws std::runtime_error. */
  std::string readMessage(bool& binary, std::chrono::milliseconds timeout);
  /**
   * Delivers the messages that arrived with the hello on the calling thread (a frame right behind
   * it is judged before the connection is used), then reads on a thread of its own: every later
   * message, then one onClose (the peer's code, or 1006).
   */
  void start(std::function<void(const std::string&, bool)> onMessage, std::function<void(int)> onClose);
  bool send(const std::string& payload, int opcode = 0x2);
  /** Sends a close frame and ends the connection. */
  void close(int code = 1000);
  /** Drops the connection without a close frame. */
  void terminate();

  struct State;

 private:
  explicit WebSocket(std::shared_ptr<State> s) : s_(std::move(s)) {}
  std::shared_ptr<State> s_;
};

}  // namespace keywarden::detail
