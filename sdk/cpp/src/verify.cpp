// docs/protocol.md 4 response verification: nothing in an answer is believed before this passes.
#include "crypto.hpp"
#include "internal.hpp"

namespace keywarden::detail {

PinnedKeys pinKeys(const std::vector<ResponseKey>& keys) {
  PinnedKeys out;
  for (const auto& k : keys) {
    auto raw = base64Decode(k.publicKey);
    if (!raw || raw->size() != 32) throw ConfigError("keywarden config: key " + k.kid + ": public_key must be base64 of 32 bytes");
    out[k.kid] = *raw;
  }
  return out;
}

std::int64_t verifyResponse(const PinnedKeys& keys, const SignedAnswer& a, std::int64_t nowMs, std::int64_t maxSkewSeconds) {
  auto header = [&](const char* name) -> const std::string* {
    auto it = a.headers->find(name);
    return it == a.headers->end() || it->second.empty() ? nullptr : &it->second;
  };
  const std::string* kid = header("x-response-kid");
  const std::string* ts = header("x-response-timestamp");
  const std::string* sig = header("x-response-signature");
  const std::string status = std::to_string(a.status);
  if (!kid || !ts || !sig) throw verificationError("unsigned", "answer " + status + " of " + a.path + " carries no signature");
  auto key = keys.find(*kid);
  if (key == keys.end()) throw verificationError("unknown_kid", "answer of " + a.path + " is signed by unpinned key " + *kid);
  auto signature = decodeSignature(*sig);
  if (!signature) throw verificationError("bad_base64", "signature of " + a.path + " is not base64 of 64 bytes");
  bool digits = !ts->empty() && ts->size() <= 12;
  for (char c : *ts) digits = digits && c >= '0' && c <= '9';
  if (!digits) throw verificationError("stale", "timestamp " + *ts + " is not unix seconds");
  std::int64_t serverMs = std::stoll(*ts) * 1000;
  std::int64_t diff = serverMs - nowMs;
  if (diff > maxSkewSeconds * 1000 || -diff > maxSkewSeconds * 1000)
    throw verificationError("stale", "timestamp " + *ts + " is " + std::to_string(diff / 1000) + " s off");
  if (!ed25519Verify(key->second, responseMessage(*kid, a.method, a.path, a.status, *ts, a.nonce, *a.body), *signature))
    throw verificationError("bad_signature", "signature of " + a.path + " (" + status + ") does not verify");
  return serverMs;
}

}  // namespace keywarden::detail
