// The realtime channel (the server's docs/protocol.md, "Realtime channel"): heartbeat calls over one
// WebSocket and pushes (revoked, update_required, notice). Nothing is believed unverified: the
// hello must be signed by a pinned key over THIS client's session and fresh X25519 key, every later
// frame must carry this connection's MAC and the next sequence number. A frame that fails is
// refused: the connection is dropped and the message never acted upon.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "channel-protocol.hpp"
#include "internal.hpp"
#include "websocket.hpp"

namespace keywarden::detail {

/** What a channel needs of its client. */
struct ChannelContext {
  std::string baseUrl;
  std::string version;
  std::optional<std::string> apiSecret;
  std::chrono::milliseconds timeout{10000};      // per call on the channel
  std::chrono::milliseconds openTimeout{5000};   // the upgrade and the hello: REST must not wait long
  PinnedKeys keys;
  std::function<std::int64_t()> serverNowMs;
  std::function<std::string()> route;  // the route the last REST answer named (X-Keywarden-Route)
  std::function<void(LogLevel, const std::string&, const std::string&)> log;
  std::string caBundle;
};

/** A pushed message: type is "revoked", "update_required" or "notice". */
struct ChannelPush {
  std::string type, reason, detail, message, latestVersion, updateUrl, at;
};

/** A push, or a state change ("open" / "closed") of the heartbeat's channel. */
struct LinkEvent {
  std::optional<ChannelPush> push;
  std::string state;
  int closeCode = 0;
  std::optional<Error> error;
};

/** One verified connection. Its callbacks run on the connection's reader thread. */
class ChannelConnection : public std::enable_shared_from_this<ChannelConnection> {
 public:
  struct OpenResult {
    std::shared_ptr<ChannelConnection> conn;
    std::optional<Error> error;
    bool offered = true;  // false: this server has no channel (404/405): REST for good
  };
  /** Upgrades, verifies the hello and derives the keys. Never throws. */
  static OpenResult open(const ChannelContext& ctx, const std::string& session);

  /** Starts reading (frames that came with the hello are judged now, on this thread). */
  void start(std::function<void(const ChannelPush&)> onPush, std::function<void(int, const std::optional<Error>&)> onClose);
  /** One call: the success body, or the server's coded error; network + notSent when the channel was already down. */
  nlohmann::json call(const std::string& op, const nlohmann::json& body);
  bool isOpen() const;
  void close(int code = 1000);

  ChannelConnection(const ChannelContext& ctx, std::shared_ptr<WebSocket> ws, ChannelKeys keys);

 private:
  struct Pending {
    bool done = false;
    nlohmann::json body;
    std::optional<Error> error;
  };
  void receive(const std::string& frame, bool binary);
  void finish(int code, std::optional<Error> error);

  ChannelContext ctx_;
  std::shared_ptr<WebSocket> ws_;
  ChannelKeys keys_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::int64_t out_ = 0, in_ = 0;
  bool closed_ = false;
  std::map<std::int64_t, std::shared_ptr<Pending>> pending_;
  std::function<void(const ChannelPush&)> onPush_;
  std::function<void(int, const std::optional<Error>&)> onClose_;
};

/**
 * The heartbeat's channel: opens it, reopens it after a drop (backoff 0.5 s doubling up to 30 s,
 * on a thread of its own), gives up for good when the server has none, and hands pushes and state
 * changes to one sink.
 */
class ChannelLink : public std::enable_shared_from_this<ChannelLink> {
 public:
  ChannelLink(ChannelContext ctx, std::string session);
  ~ChannelLink();
  ChannelLink(const ChannelLink&) = delete;
  ChannelLink& operator=(const ChannelLink&) = delete;

  /** Where pushes and state changes go (from other threads); those that came before are delivered now. */
  void attach(std::function<void(const LinkEvent&)> sink);
  bool ready() const;
  /** One attempt now; true when the channel is open. */
  bool connect();
  nlohmann::json call(const std::string& op, const nlohmann::json& body);
  /** After a re-authentication: the channel of the new session. */
  bool rebind(const std::string& session);
  /** For good. */
  void close();

 private:
  void deliver(const LinkEvent& e);
  void closed(const std::shared_ptr<ChannelConnection>& conn, int code, const std::optional<Error>& error);
  void retry(std::optional<int> hintSeconds);  // under mu_
  void work();

  ChannelContext ctx_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string session_;
  std::shared_ptr<ChannelConnection> conn_;
  int attempts_ = 0;
  bool off_ = false;
  std::optional<std::chrono::steady_clock::time_point> retryAt_;
  std::thread worker_;
  std::function<void(const LinkEvent&)> sink_;
  std::deque<LinkEvent> backlog_;
};

}  // namespace keywarden::detail
