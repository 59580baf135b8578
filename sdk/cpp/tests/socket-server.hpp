// A small TCP server on 127.0.0.1 for the tests that need real sockets (the libcurl transport, the
// update download). POSIX sockets (Linux, macOS).
#pragma once

#if !defined(_WIN32)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0  // macOS: SO_NOSIGPIPE on the socket instead
#endif
#include <functional>
#include <stdexcept>
#include <string>

namespace kwtest {

/** One-connection-at-a-time TCP server on an ephemeral port; `serve` handles each accepted socket. */
class SocketServer {
 public:
  explicit SocketServer(std::function<void(int)> serve) : serve_(std::move(serve)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 8) != 0) throw std::runtime_error("bind");
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0 || stopping_) {
          if (c >= 0) ::close(c);
          return;
        }
        ++accepted_;
#ifdef SO_NOSIGPIPE
        int on = 1;
        ::setsockopt(c, SOL_SOCKET, SO_NOSIGPIPE, &on, sizeof on);
#endif
        serve_(c);
        ::close(c);
      }
    });
  }
  ~SocketServer() {
    stopping_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    // Wake a blocking accept() by connecting once.
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port_);
    ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::close(s);
    thread_.join();
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int accepted() const { return accepted_; }

 private:
  std::function<void(int)> serve_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

/** Reads one HTTP request (headers + Content-Length body). */
inline std::string readRequest(int c) {
  std::string data;
  char buf[4096];
  for (;;) {
    auto end = data.find("\r\n\r\n");
    if (end != std::string::npos) {
      auto cl = data.find("Content-Length: ");
      std::size_t len = cl == std::string::npos ? 0 : std::stoul(data.substr(cl + 16));
      if (data.size() >= end + 4 + len) return data;
    }
    ssize_t n = ::recv(c, buf, sizeof buf, 0);
    if (n <= 0) return data;
    data.append(buf, static_cast<std::size_t>(n));
  }
}

inline void sendAll(int c, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(c, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<std::size_t>(n);
  }
}

inline int closedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  ::close(fd);  // bound, never listened, now closed: connecting is refused
  return port;
}

}  // namespace kwtest
#endif
