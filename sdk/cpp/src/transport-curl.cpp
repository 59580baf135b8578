// The default transport on libcurl. It must know whether a failed request can have reached the
// server: a heartbeat beat that never left may be sent again unchanged (same index and token),
// one that may have arrived must not (docs/spec.md: a replayed beat_index is refused).
#include <curl/curl.h>

#include "curl-util.hpp"
#include "internal.hpp"

namespace keywarden {

namespace {

struct Sink {
  std::string body;
  std::map<std::string, std::string> headers;
  std::size_t max;
  bool tooBig = false;
};

size_t onBody(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  size_t len = size * n;
  if (s->body.size() + len > s->max) {
    s->tooBig = true;
    return 0;  // makes libcurl fail the transfer with CURLE_WRITE_ERROR
  }
  s->body.append(data, len);
  return len;
}

size_t onHeader(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  size_t len = size * n;
  std::string line(data, len);
  if (line.rfind("HTTP/", 0) == 0) {
    s->headers.clear();  // a new response (after 100 Continue or a proxy's CONNECT answer)
    return len;
  }
  auto colon = line.find(':');
  if (colon == std::string::npos) return len;
  std::string name = detail::lowerAscii(detail::trimAscii(line.substr(0, colon)));
  std::string value = detail::trimAscii(line.substr(colon + 1));
  auto it = s->headers.find(name);
  if (it == s->headers.end()) s->headers.emplace(std::move(name), std::move(value));
  else it->second += ", " + value;
  return len;
}

class CurlTransport final : public Transport {
 public:
  explicit CurlTransport(CurlTransportOptions o) : o_(std::move(o)) { detail::ensureCurl(); }

  HttpResponse send(const HttpRequest& req) override {
    using Kind = TransportError::Kind;
    CURL* h = curl_easy_init();
    if (!h) throw TransportError(Kind::network, false, "curl_easy_init failed");
    curl_slist* list = nullptr;
    struct Cleanup {
      CURL* h;
      curl_slist** list;
      ~Cleanup() {
        curl_slist_free_all(*list);
        curl_easy_cleanup(h);
      }
    } cleanup{h, &list};

    Sink sink;
    sink.max = o_.maxResponseBytes;
    for (const auto& [k, v] : req.headers) list = curl_slist_append(list, (k + ": " + v).c_str());
    list = curl_slist_append(list, "Expect:");  // no 100-continue round trip
    long ms = static_cast<long>(req.timeout.count() > 0 ? req.timeout.count() : 1);
    curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // timeouts without SIGALRM: we run on several threads
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "keywarden-cpp/1.0.0");
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
    if (req.method != "GET") {
      // Every other method sends the request's body (POST, and PATCH or PUT through a custom transport user).
      curl_easy_setopt(h, CURLOPT_POST, 1L);
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body.data());
      if (req.method != "POST") curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    // "" disables proxies from the environment too: where the SDK connects is decided by the host program.
    curl_easy_setopt(h, CURLOPT_PROXY, o_.proxy.c_str());
    if (!o_.caBundle.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, o_.caBundle.c_str());
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, onBody);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, onHeader);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &sink);

    CURLcode rc;
    {
      [[maybe_unused]] detail::SigpipeGuard guard;
      rc = curl_easy_perform(h);
    }
    if (rc != CURLE_OK) {
      // Nothing was sent when no connection came up; after that the server may have the request.
      curl_off_t pretransfer = 0;
      curl_easy_getinfo(h, CURLINFO_PRETRANSFER_TIME_T, &pretransfer);
      bool neverConnected = rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY || rc == CURLE_COULDNT_CONNECT;
      bool sent = !neverConnected && pretransfer > 0;
      std::string what = std::string(curl_easy_strerror(rc)) + " (curl " + std::to_string(static_cast<int>(rc)) + ")";
      if (sink.tooBig) throw TransportError(Kind::network, true, "answer larger than " + std::to_string(sink.max) + " bytes");
      if (rc == CURLE_OPERATION_TIMEDOUT)
        throw TransportError(Kind::timeout, sent, "no answer within " + std::to_string(ms) + " ms: " + what);
      throw TransportError(Kind::network, sent, what);
    }
    HttpResponse res;
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    res.status = static_cast<int>(status);
    res.headers = std::move(sink.headers);
    res.body = std::move(sink.body);
    return res;
  }

 private:
  CurlTransportOptions o_;
};

}  // namespace

std::shared_ptr<Transport> makeCurlTransport(const CurlTransportOptions& options) {
  return std::make_shared<CurlTransport>(options);
}

}  // namespace keywarden
