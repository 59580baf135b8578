// Updates: the upgrade check's offer and the verified download of an artifact. An offer is believed
// only when every artifact carries an Ed25519 signature, by a pinned response-signing key, over
// "kwart1.<app_id>.<version>.<filename>.<sha512 hex>" (the server's docs/releases.md "Artifacts";
// sdk/vectors/artifacts.json fixes the order of the checks). A download streams into a temporary
// file next to the target, checks size, SHA-512 and that signature, and only then renames it over
// the target; any failure removes the temporary file and throws an UpdateError.
#include <curl/curl.h>
#include <sodium.h>

#include <cstdio>
#include <filesystem>

#if !defined(_WIN32)
#include <unistd.h>
#else
#include <io.h>
#endif

#include "client-impl.hpp"
#include "crypto.hpp"
#include "curl-util.hpp"
#include "updates.hpp"

namespace keywarden {

UpdateError::UpdateError(ErrorCode code, const std::string& reason, const std::string& message)
    : Error(code, "update refused (" + reason + "): " + message) {
  withReason(reason);
}

namespace detail {

std::string artifactMessage(const std::string& appId, const std::string& version, const std::string& filename,
                            const std::string& sha512Hex) {
  return "kwart1." + appId + "." + version + "." + filename + "." + sha512Hex;
}

void verifyArtifact(const PinnedKeys& keys, const Artifact& a) {
  auto key = keys.find(a.kid);
  if (key == keys.end()) throw UpdateError(ErrorCode::verification, "unknown_kid", a.filename + " is signed by unpinned key " + a.kid);
  auto sig = decodeSignature(a.signature);
  if (!sig || !ed25519Verify(key->second, artifactMessage(a.appId, a.version, a.filename, a.sha512), *sig))
    throw UpdateError(ErrorCode::verification, "bad_signature", "signature of " + a.filename + " " + a.version + " does not verify");
}

namespace {

struct Sink {
  std::FILE* file = nullptr;
  CURL* curl = nullptr;
  const Artifact* artifact = nullptr;
  const ProgressCallback* progress = nullptr;
  crypto_hash_sha512_state sha{};
  std::uint64_t received = 0;
  long status = 0;
  std::string refusal;  // the body of a non-200 answer (its first 4 KiB)
  bool tooLong = false;
  bool writeFailed = false;
  std::exception_ptr callbackError;
};

std::size_t onData(char* data, std::size_t size, std::size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  const std::size_t len = size * n;
  if (s->status == 0) curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &s->status);
  if (s->status != 200) {
    if (s->refusal.size() < 4096) s->refusal.append(data, std::min<std::size_t>(len, 4096 - s->refusal.size()));
    return len;
  }
  s->received += len;
  if (s->received > s->artifact->size) {
    s->tooLong = true;
    return 0;  // aborts the transfer
  }
  crypto_hash_sha512_update(&s->sha, reinterpret_cast<const unsigned char*>(data), len);
  if (std::fwrite(data, 1, len, s->file) != len) {
    s->writeFailed = true;
    return 0;
  }
  if (*s->progress) {
    try {
      (*s->progress)(s->received, s->artifact->size);
    } catch (...) {
      s->callbackError = std::current_exception();
      return 0;
    }
  }
  return len;
}

std::string detailOf(const std::string& body) {
  auto parsed = nlohmann::json::parse(body, nullptr, false);
  if (parsed.is_object() && parsed.contains("detail")) return parsed["detail"].dump();
  return nlohmann::json(body).dump();
}

/** The transfer into `s.file`; throws UpdateError(download_failed) for anything but a complete 200. */
void transfer(const Artifact& a, Sink& s, std::chrono::milliseconds timeout, const std::string& proxy, const std::string& caBundle) {
  ensureCurl();
  std::unique_ptr<CURL, void (*)(CURL*)> h(curl_easy_init(), curl_easy_cleanup);
  if (!h) throw UpdateError(ErrorCode::network, "download_failed", "curl_easy_init failed");
  s.curl = h.get();
  const long ms = static_cast<long>(timeout.count());
  curl_easy_setopt(h.get(), CURLOPT_URL, a.url.c_str());
  curl_easy_setopt(h.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h.get(), CURLOPT_CONNECTTIMEOUT_MS, ms);
  // A stall, not the whole download, is bounded: under 1 byte/s for the timeout ends it.
  curl_easy_setopt(h.get(), CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h.get(), CURLOPT_LOW_SPEED_TIME, std::max(1L, ms / 1000));
  curl_easy_setopt(h.get(), CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h.get(), CURLOPT_USERAGENT, "keywarden-cpp/1.0.0");
  curl_easy_setopt(h.get(), CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h.get(), CURLOPT_PROXY, proxy.c_str());
  if (!caBundle.empty()) curl_easy_setopt(h.get(), CURLOPT_CAINFO, caBundle.c_str());
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, onData);
  curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, &s);
  CURLcode rc;
  {
    SigpipeGuard guard;
    rc = curl_easy_perform(h.get());
  }
  if (s.callbackError) std::rethrow_exception(s.callbackError);
  if (s.tooLong) throw UpdateError(ErrorCode::verification, "size_mismatch", a.filename + ": more than the offered " + std::to_string(a.size) + " bytes");
  if (s.writeFailed) throw UpdateError(ErrorCode::network, "download_failed", "writing " + a.filename + " failed");
  if (rc != CURLE_OK) {
    const bool slow = rc == CURLE_OPERATION_TIMEDOUT;
    throw UpdateError(slow ? ErrorCode::timeout : ErrorCode::network, "download_failed",
                      "GET " + a.filename + ": " + curl_easy_strerror(rc));
  }
  if (s.status == 0) curl_easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, &s.status);
  if (s.status != 200) {
    UpdateError e(ErrorCode::server, "download_failed", a.filename + ": " + std::to_string(s.status) + " " + s.refusal);
    e.withStatus(static_cast<int>(s.status)).withDetailJson(detailOf(s.refusal));
    throw e;
  }
}

}  // namespace

std::string downloadArtifact(const PinnedKeys& keys, const Artifact& a, const std::string& targetPath,
                             const ProgressCallback& progress, std::chrono::milliseconds timeout, const std::string& proxy,
                             const std::string& caBundle) {
  namespace fs = std::filesystem;
  verifyArtifact(keys, a);
  const fs::path target = fs::absolute(fs::u8path(targetPath));
  const fs::path tmp = target.parent_path() / fs::u8path("." + target.filename().u8string() + "." + toHex(randomBytes(6)) + ".part");
  Sink s;
  s.artifact = &a;
  s.progress = &progress;
  crypto_hash_sha512_init(&s.sha);
#if defined(_WIN32)
  s.file = _wfopen(tmp.c_str(), L"wb");
#else
  s.file = std::fopen(tmp.c_str(), "wb");
#endif
  if (!s.file) throw UpdateError(ErrorCode::network, "download_failed", "cannot create " + tmp.u8string());
  try {
    transfer(a, s, timeout, proxy, caBundle);
    bool flushed = std::fflush(s.file) == 0;
#if defined(_WIN32)
    flushed = flushed && _commit(_fileno(s.file)) == 0;
#else
    flushed = flushed && fsync(fileno(s.file)) == 0;
#endif
    const bool closed = std::fclose(s.file) == 0;
    s.file = nullptr;
    if (!flushed || !closed) throw UpdateError(ErrorCode::network, "download_failed", "writing " + tmp.u8string() + " failed");
    if (s.received != a.size)
      throw UpdateError(ErrorCode::verification, "size_mismatch",
                        a.filename + ": " + std::to_string(s.received) + " bytes, offered " + std::to_string(a.size));
    unsigned char digest[crypto_hash_sha512_BYTES];
    crypto_hash_sha512_final(&s.sha, digest);
    std::string want = a.sha512;
    for (auto& c : want) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!constantTimeEquals(toHex(std::string(reinterpret_cast<char*>(digest), sizeof digest)), want))
      throw UpdateError(ErrorCode::verification, "sha512_mismatch", a.filename + ": SHA-512 differs from the offer");
    std::error_code ec;
    fs::rename(tmp, target, ec);
    if (ec) throw UpdateError(ErrorCode::network, "download_failed", "moving into " + target.u8string() + ": " + ec.message());
    return target.u8string();
  } catch (...) {
    if (s.file) std::fclose(s.file);
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
}

UpdateOffer parseOffer(const nlohmann::json& u, const std::string& appId, const PinnedKeys& keys) {
  auto text = [](const nlohmann::json& o, const char* name) {
    auto it = o.find(name);
    if (it == o.end() || !it->is_string() || it->get<std::string>().empty())
      throw verificationError("malformed", std::string("upgrade answer lacks ") + name);
    return it->get<std::string>();
  };
  auto time = [](const nlohmann::json& o, const char* name) -> std::optional<TimePoint> {
    auto it = o.find(name);
    if (it == o.end() || !it->is_string()) return std::nullopt;
    auto ms = parseUtcMs(it->get<std::string>());
    if (!ms) return std::nullopt;
    return timeFromMs(*ms);
  };
  UpdateOffer offer;
  offer.version = text(u, "version");
  offer.channel = u.value("channel", std::string());
  offer.notes = u.contains("notes") && u["notes"].is_string() ? u["notes"].get<std::string>() : std::string();
  offer.publishedAt = time(u, "published_at");
  auto list = u.find("artifacts");
  if (list == u.end() || !list->is_array() || list->empty()) throw verificationError("malformed", "upgrade answer lists no artifacts");
  for (const auto& o : *list) {
    if (!o.is_object()) throw verificationError("malformed", "an artifact is not an object");
    auto size = o.find("size");
    if (size == o.end() || !size->is_number_unsigned()) throw verificationError("malformed", "artifact size is not a count of bytes");
    Artifact a;
    a.appId = appId;
    a.version = offer.version;
    a.filename = text(o, "filename");
    a.platform = text(o, "platform");
    a.arch = text(o, "arch");
    a.size = size->get<std::uint64_t>();
    a.sha512 = text(o, "sha512");
    a.signature = text(o, "signature");
    a.kid = text(o, "kid");
    a.url = text(o, "url");
    a.urlExpiresAt = time(o, "url_expires_at");
    verifyArtifact(keys, a);
    offer.artifacts.push_back(std::move(a));
  }
  return offer;
}

}  // namespace detail

std::optional<UpdateOffer> Client::checkUpdate(const std::string& version, const std::string& channel, const std::string& platform,
                                               const std::string& arch) {
  if (impl_->config.appId.empty()) throw ConfigError("keywarden config: app_id missing (release artifacts are signed for it)");
  auto r = impl_->call("releases/upgrade", {{"session", impl_->requireSession()},
                                            {"version", version},
                                            {"channel", channel},
                                            {"platform", platform},
                                            {"arch", arch}});
  auto it = r.find("upgrade");
  if (it == r.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) throw detail::verificationError("malformed", "upgrade answer is not an object");
  return detail::parseOffer(*it, impl_->config.appId, impl_->keys);
}

std::string Client::downloadUpdate(const Artifact& artifact, const std::string& targetPath, ProgressCallback progress) {
  return detail::downloadArtifact(impl_->keys, artifact, targetPath, progress, impl_->timeout, impl_->proxy, impl_->caBundle);
}

}  // namespace keywarden
