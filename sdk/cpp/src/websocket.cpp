#include "websocket.hpp"

#include <curl/curl.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>

#if defined(_WIN32)
#include <winsock2.h>
#else
#include <poll.h>
#include <sys/socket.h>
#endif

#include "crypto.hpp"
#include "curl-util.hpp"
#include "internal.hpp"

namespace keywarden::detail {

namespace {
constexpr std::size_t kMaxMessage = 1u << 20;
const char* const kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/** Waits until the socket is readable (or writable); false on timeout. */
bool waitFor(curl_socket_t fd, bool write, int timeoutMs) {
#if defined(_WIN32)
  WSAPOLLFD p{};
  p.fd = fd;
  p.events = write ? POLLWRNORM : POLLRDNORM;
  return WSAPoll(&p, 1, timeoutMs) > 0;
#else
  struct pollfd p {};
  p.fd = fd;
  p.events = write ? POLLOUT : POLLIN;
  return ::poll(&p, 1, timeoutMs) > 0;
#endif
}

std::int64_t msLeft(std::chrono::steady_clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
}
}  // namespace

struct WebSocket::State {
  CURL* h = nullptr;
  curl_socket_t fd = CURL_SOCKET_BAD;
  std::mutex io;  // a curl handle is used by one thread at a time
  std::string buf;
  std::atomic<bool> closed{false};
  std::atomic<bool> reading{false};
  std::function<void(const std::string&, bool)> onMessage;
  std::function<void(int)> onClose;

  ~State() {
    if (h) curl_easy_cleanup(h);
  }

  /** Appends what arrives within `timeoutMs` (< 0: no limit); false when the connection closed. Throws on timeout. */
  bool receive(int timeoutMs) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs < 0 ? 0 : timeoutMs);
    char chunk[16384];
    for (;;) {
      if (closed) return false;
      size_t n = 0;
      CURLcode rc;
      {
        std::lock_guard<std::mutex> lk(io);
        rc = curl_easy_recv(h, chunk, sizeof chunk, &n);
      }
      if (rc == CURLE_OK) {
        if (n == 0) return false;
        buf.append(chunk, n);
        return true;
      }
      if (rc != CURLE_AGAIN) return false;
      int wait = 200;  // slices, so a close from another thread is noticed
      if (timeoutMs >= 0) {
        auto left = msLeft(deadline);
        if (left <= 0) throw std::runtime_error("no data within " + std::to_string(timeoutMs) + " ms");
        wait = static_cast<int>(std::min<std::int64_t>(left, 200));
      }
      waitFor(fd, false, wait);
    }
  }

  bool sendAll(const std::string& data) {
    std::size_t off = 0;
    [[maybe_unused]] SigpipeGuard guard;
    while (off < data.size()) {
      if (closed) return false;
      size_t n = 0;
      CURLcode rc;
      {
        std::lock_guard<std::mutex> lk(io);
        rc = curl_easy_send(h, data.data() + off, data.size() - off, &n);
      }
      if (rc == CURLE_OK) off += n;
      else if (rc == CURLE_AGAIN) waitFor(fd, true, 1000);
      else return false;
    }
    return true;
  }

  bool frame(int opcode, const std::string& payload) {
    std::string f;
    f.push_back(static_cast<char>(0x80 | opcode));
    std::size_t len = payload.size();
    if (len < 126) {
      f.push_back(static_cast<char>(0x80 | len));
    } else if (len < 65536) {
      f.push_back(static_cast<char>(0x80 | 126));
      f.push_back(static_cast<char>(len >> 8));
      f.push_back(static_cast<char>(len & 0xff));
    } else {
      f.push_back(static_cast<char>(0x80 | 127));
      for (int i = 7; i >= 0; --i) f.push_back(static_cast<char>((static_cast<std::uint64_t>(len) >> (8 * i)) & 0xff));
    }
    std::string mask = randomBytes(4);
    f += mask;
    for (std::size_t i = 0; i < len; ++i) f.push_back(static_cast<char>(payload[i] ^ mask[i & 3]));
    return sendAll(f);
  }

  /** A whole data frame in `buf` (fragments and control frames are left to the reader). */
  bool dataFrameBuffered() const {
    if (buf.size() < 2) return false;
    auto b = [&](std::size_t i) { return static_cast<unsigned char>(buf[i]); };
    int opcode = b(0) & 0x0f;
    if (!(b(0) & 0x80) || (opcode != 1 && opcode != 2)) return false;
    std::uint64_t len = b(1) & 0x7f;
    std::size_t off = 2;
    if (len == 126) {
      if (buf.size() < 4) return false;
      len = (b(2) << 8) | b(3);
      off = 4;
    } else if (len == 127) {
      if (buf.size() < 10) return false;
      len = 0;
      for (int i = 0; i < 8; ++i) len = (len << 8) | b(2 + i);
      off = 10;
    }
    return len <= kMaxMessage && buf.size() >= off + len;
  }

  /** The next data message (control frames answered); false after a close frame (code set). Throws on protocol errors. */
  bool next(std::string& out, bool& binary, int& code, int timeoutMs) {
    std::string fragments;
    bool inMessage = false;
    auto fill = [&](std::size_t n) {
      while (buf.size() < n)
        if (!receive(timeoutMs)) throw std::runtime_error("connection closed");
    };
    for (;;) {
      fill(2);
      auto b = [&](std::size_t i) { return static_cast<unsigned char>(buf[i]); };
      int b0 = b(0), b1 = b(1);
      if (b1 & 0x80) throw std::runtime_error("masked frame from the server");
      std::uint64_t len = b1 & 0x7f;
      std::size_t off = 2;
      if (len == 126) {
        fill(4);
        len = (b(2) << 8) | b(3);
        off = 4;
      } else if (len == 127) {
        fill(10);
        len = 0;
        for (int i = 0; i < 8; ++i) len = (len << 8) | b(2 + i);
        off = 10;
      }
      if (len > kMaxMessage) throw std::runtime_error("message too big");
      fill(off + len);
      std::string payload = buf.substr(off, len);
      buf.erase(0, off + len);
      int opcode = b0 & 0x0f;
      switch (opcode) {
        case 0x0:
        case 0x1:
        case 0x2:
          if (opcode != 0) {
            fragments.clear();
            binary = opcode == 2;
            inMessage = true;
          }
          if (!inMessage) throw std::runtime_error("continuation without a first frame");
          fragments += payload;
          if (fragments.size() > kMaxMessage) throw std::runtime_error("message too big");
          if (b0 & 0x80) {
            out = std::move(fragments);
            return true;
          }
          break;
        case 0x8:
          code = payload.size() >= 2 ? (static_cast<unsigned char>(payload[0]) << 8) | static_cast<unsigned char>(payload[1]) : 1005;
          frame(0x8, payload.substr(0, 2));
          return false;
        case 0x9:
          frame(0xA, payload);
          break;
        case 0xA:
          break;
        default:
          throw std::runtime_error("unknown opcode " + std::to_string(opcode));
      }
    }
  }

  void finish(int code) {
    if (closed.exchange(true)) return;
#if defined(_WIN32)
    if (fd != CURL_SOCKET_BAD) ::shutdown(fd, SD_BOTH);
#else
    if (fd != CURL_SOCKET_BAD) ::shutdown(fd, SHUT_RDWR);
#endif
    auto cb = std::move(onClose);
    onClose = nullptr;
    if (cb) cb(code);
  }
};

std::shared_ptr<WebSocket> WebSocket::open(const std::string& url, const Headers& headers, std::chrono::milliseconds timeout,
                                           const std::string& caBundle, UpgradeRefusal* refusal) {
  ensureCurl();
  auto s = std::make_shared<State>();
  s->h = curl_easy_init();
  if (!s->h) throw std::runtime_error("curl_easy_init failed");
  long ms = static_cast<long>(timeout.count() > 0 ? timeout.count() : 1);
  curl_easy_setopt(s->h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(s->h, CURLOPT_CONNECT_ONLY, 1L);
  curl_easy_setopt(s->h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(s->h, CURLOPT_CONNECTTIMEOUT_MS, ms);
  curl_easy_setopt(s->h, CURLOPT_PROXY, "");  // the channel is used only without a proxy
  if (!caBundle.empty()) curl_easy_setopt(s->h, CURLOPT_CAINFO, caBundle.c_str());
  CURLcode rc;
  {
    [[maybe_unused]] SigpipeGuard guard;
    rc = curl_easy_perform(s->h);
  }
  if (rc != CURLE_OK) throw std::runtime_error(std::string(curl_easy_strerror(rc)) + " (curl " + std::to_string(static_cast<int>(rc)) + ")");
  curl_easy_getinfo(s->h, CURLINFO_ACTIVESOCKET, &s->fd);
  auto deadline = std::chrono::steady_clock::now() + timeout;

  // The upgrade. Host, path and the key of RFC 6455 section 4.1.
  std::string rest = url.substr(url.find("://") + 3);
  std::size_t slash = rest.find('/');
  std::string host = slash == std::string::npos ? rest : rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "/" : rest.substr(slash);
  std::string key = base64Encode(randomBytes(16));
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + host +
                    "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + "\r\n";
  for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
  req += "\r\n";
  if (!s->sendAll(req)) throw std::runtime_error("connection closed during the upgrade");
  std::size_t end;
  while ((end = s->buf.find("\r\n\r\n")) == std::string::npos) {
    if (s->buf.size() > 65536) throw std::runtime_error("upgrade answer too large");
    auto left = msLeft(deadline);
    if (left <= 0) throw std::runtime_error("no upgrade answer within " + std::to_string(timeout.count()) + " ms");
    if (!s->receive(static_cast<int>(left))) throw std::runtime_error("connection closed during the upgrade");
  }
  std::string head = s->buf.substr(0, end);
  s->buf.erase(0, end + 4);
  std::size_t lineEnd = head.find("\r\n");
  std::string statusLine = head.substr(0, lineEnd);
  int status = 0;
  {
    std::size_t sp = statusLine.find(' ');
    if (statusLine.rfind("HTTP/", 0) != 0 || sp == std::string::npos) throw std::runtime_error("not an HTTP answer: " + statusLine);
    status = std::atoi(statusLine.c_str() + sp + 1);
  }
  std::map<std::string, std::string> got;
  for (std::size_t at = lineEnd; at != std::string::npos && at < head.size();) {
    std::size_t next = head.find("\r\n", at + 2);
    std::string line = head.substr(at + 2, next == std::string::npos ? std::string::npos : next - at - 2);
    at = next;
    std::size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0) continue;
    std::string name = lowerAscii(trimAscii(line.substr(0, colon)));
    std::string value = trimAscii(line.substr(colon + 1));
    auto it = got.find(name);
    if (it == got.end()) got.emplace(name, value);
    else it->second += ", " + value;
  }
  if (status != 101) {
    std::size_t want = 0;
    auto cl = got.find("content-length");
    if (cl != got.end()) want = static_cast<std::size_t>(std::min<long long>(std::max(0LL, std::atoll(cl->second.c_str())), 65536));
    while (s->buf.size() < want && msLeft(deadline) > 0 && s->receive(static_cast<int>(msLeft(deadline)))) {
    }
    refusal->status = status;
    refusal->headers = std::move(got);
    refusal->body = s->buf.substr(0, want);
    return nullptr;
  }
  auto accept = got.find("sec-websocket-accept");
  std::string expected = base64Encode(sha1Raw(key + kGuid));
  if (accept == got.end() || accept->second != expected) throw std::runtime_error("the server did not accept the WebSocket handshake");
  return std::shared_ptr<WebSocket>(new WebSocket(s));
}

WebSocket::~WebSocket() {
  // The reader thread holds the state; ending the connection ends the thread.
  s_->finish(1006);
}

std::string WebSocket::readMessage(bool& binary, std::chrono::milliseconds timeout) {
  std::string out;
  int code = 1006;
  bool ok;
  try {
    ok = s_->next(out, binary, code, static_cast<int>(std::max<std::int64_t>(1, timeout.count())));
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("no hello: ") + e.what());
  }
  if (!ok) throw std::runtime_error("channel closed (" + std::to_string(code) + ") before its hello");
  return out;
}

void WebSocket::start(std::function<void(const std::string&, bool)> onMessage, std::function<void(int)> onClose) {
  auto s = s_;
  s->onClose = std::move(onClose);
  try {
    while (!s->closed && s->dataFrameBuffered()) {
      std::string m;
      bool binary = false;
      int code = 1006;
      if (!s->next(m, binary, code, 0)) return s->finish(code);
      onMessage(m, binary);
    }
  } catch (const std::exception&) {
    return s->finish(1006);
  }
  if (s->closed) return;
  s->onMessage = std::move(onMessage);
  s->reading = true;
  std::thread([s] {
    int code = 1006;
    try {
      for (;;) {
        std::string m;
        bool binary = false;
        if (!s->next(m, binary, code, -1)) break;
        s->onMessage(m, binary);
      }
    } catch (...) {
      code = 1006;  // a broken connection, a protocol violation, or a handler that threw
    }
    s->finish(code);
    s->onMessage = nullptr;  // releases what the handler holds (the connection)
  }).detach();
}

bool WebSocket::send(const std::string& payload, int opcode) { return !s_->closed && s_->frame(opcode, payload); }

void WebSocket::close(int code) {
  std::string p;
  p.push_back(static_cast<char>((code >> 8) & 0xff));
  p.push_back(static_cast<char>(code & 0xff));
  if (!s_->closed) s_->frame(0x8, p);
  s_->finish(code);
}

void WebSocket::terminate() { s_->finish(1006); }

}  // namespace keywarden::detail
