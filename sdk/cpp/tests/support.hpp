// Shared test support: environment, vectors, and FakeServer, an in-process Keywarden (a
// Transport) that signs its answers like the real server, so every client path (hostile answers,
// lost beats, clock offsets, encryption) can be driven without a network.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "keywarden/keywarden.hpp"

namespace kwtest {

/** Value of an environment variable, or "". */
std::string env(const char* name);
/** sdk/vectors/<file> parsed; skips the test when the directory is missing (fails with KW_REQUIRE_VECTORS=1). */
nlohmann::json vectors(const std::string& file);
std::string readFile(const std::string& path);
/**
 * The next unused license key of KW_KEYS_PLAIN / KW_KEYS_SIGNED for the integration tests, from the
 * front; the last three belong to the C smoke test and the repository's e2e test (example, zip).
 */
std::string takeKey(const char* var);
/** Unix seconds of a time point. */
std::int64_t unixSeconds(keywarden::TimePoint t);

struct FakeRequest {
  std::string path;  // /api/client/init
  std::map<std::string, std::string> headers;  // lower-cased
  std::string rawBody;
  nlohmann::json body;
};

class FakeServer : public keywarden::Transport {
 public:
  explicit FakeServer(std::optional<std::string> apiSecret = std::nullopt);

  /** keywarden.json text pinning this server's key (kid k1). */
  std::string configJson() const;
  keywarden::Client client(keywarden::Options options = {});

  keywarden::HttpResponse send(const keywarden::HttpRequest& request) override;

  /** Answer signed like the real server: over the request's nonce, with server time now + clockOffset. */
  keywarden::HttpResponse signedAnswer(const FakeRequest& req, int status, const std::string& body,
                                       std::map<std::string, std::string> extraHeaders = {}) const;
  /**
   * docs/protocol.md 12.5: kwlic1.<base64url(payload)>.<base64url(Ed25519 by `keySeed`, default this server's key)>.
   */
  std::string licenseFile(const std::string& payloadJson, const std::string& keySeed = {}) const;
  /** Same, but signed with explicit kid / timestamp / nonce / key seed (for hostile answers). */
  keywarden::HttpResponse signWith(const std::string& path, int status, const std::string& body, const std::string& nonce,
                                   std::int64_t timestamp, const std::string& kid, const std::string& seed) const;

  /**
   * Runs before the built-in behaviour. Return an answer to send it instead; throw a
   * TransportError to simulate the network; return nullopt to let the fake answer normally.
   */
  std::function<std::optional<keywarden::HttpResponse>(const FakeRequest&, FakeServer&)> hook;
  /** Called after the built-in answer was made (before it is returned): lets a test lose it. */
  std::function<void(const FakeRequest&, const keywarden::HttpResponse&)> after;

  // Behaviour knobs.
  // Atomic: tests flip them while a heartbeat thread is calling the fake.
  std::atomic<std::int64_t> clockOffsetSeconds{0};  // the server's clock minus the real clock
  std::atomic<int> beatInterval{5};
  std::atomic<bool> spoilStartProof{false};
  std::atomic<bool> spoilBeatProof{false};
  std::atomic<bool> failLogin{false};
  std::atomic<bool> lifetimeLicense{false};
  // The license's expires_at (unix ms; 0: 2030-01-02T03:04:05.678Z). With enforceExpiry, beats past it are refused
  // as the server's expiry kill does (docs/protocol.md 12.8).
  std::atomic<std::int64_t> expiresAtMs{0};
  std::atomic<bool> enforceExpiry{false};
  // docs/protocol.md 12.
  std::atomic<std::int64_t> graceSeconds{-1};  // >= 0: answers carry grace_until = now + this
  std::atomic<int> trialHours{0};              // 0: trials off
  std::atomic<int> offlineDays{0};             // 0: offline files off
  std::vector<std::string> entitlements{"pro", "export"};  // of every key; set before the client calls
  std::string encKeyOfSession;  // set from init's enc_key

  std::vector<FakeRequest> requests() const;
  std::vector<std::string> paths() const;
  std::int64_t nowSeconds() const;

  std::string seed;  // raw 32-byte Ed25519 seed of the k1 key
  std::string publicKey;
  std::optional<std::string> apiSecret;

 private:
  mutable std::mutex mu_;
  std::vector<FakeRequest> log_;
  std::string session_;
  std::string token_;
  std::string systemId_;
  std::int64_t lastIndex_ = 0;
  std::int64_t beats_ = 0;
  std::vector<std::string> trials_;  // lower-cased HWIDs that had a trial
  std::string activatedHwid_;        // of the session's activation
  std::atomic<int> counter_{0};

  keywarden::HttpResponse answer(const FakeRequest& req);
};

}  // namespace kwtest
