// Every libsodium call of the SDK lives here.
#include "crypto.hpp"

#include <sodium.h>

#include <mutex>

#include "aes256.hpp"
#include "keywarden/keywarden.hpp"

namespace keywarden::detail {

namespace {
const unsigned char* bytes(const std::string& s) { return reinterpret_cast<const unsigned char*>(s.data()); }
}  // namespace

void ensureSodium() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] { ok = sodium_init() >= 0; });
  if (!ok) throw Error(ErrorCode::server, "libsodium could not be initialised");
}

std::string sha256Raw(const std::string& data) {
  std::string out(crypto_hash_sha256_BYTES, '\0');
  crypto_hash_sha256(reinterpret_cast<unsigned char*>(&out[0]), bytes(data), data.size());
  return out;
}

std::string sha256Hex(const std::string& data) { return toHex(sha256Raw(data)); }

std::string hmacSha256Raw(const std::string& key, const std::string& message) {
  // The _state API takes keys of any length (the one-shot crypto_auth_hmacsha256 wants 32 bytes).
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, bytes(key), key.size());
  crypto_auth_hmacsha256_update(&st, bytes(message), message.size());
  std::string out(crypto_auth_hmacsha256_BYTES, '\0');
  crypto_auth_hmacsha256_final(&st, reinterpret_cast<unsigned char*>(&out[0]));
  sodium_memzero(&st, sizeof st);
  return out;
}

std::string toHex(const std::string& raw) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string base64Encode(const std::string& raw) {
  std::string out(sodium_base64_ENCODED_LEN(raw.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(&out[0], out.size(), bytes(raw), raw.size(), sodium_base64_VARIANT_ORIGINAL);
  out.resize(out.size() - 1);  // the terminating NUL
  return out;
}

std::optional<std::string> base64Decode(const std::string& text) {
  std::string out(text.size() / 4 * 3 + 3, '\0');
  std::size_t len = 0;
  const char* end = nullptr;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(&out[0]), out.size(), text.c_str(), text.size(), nullptr,
                        &len, &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
      end != text.c_str() + text.size())
    return std::nullopt;
  out.resize(len);
  return out;
}

std::optional<std::string> decodeSignature(const std::string& text) {
  // Checked by hand first: a lenient decoder would accept junk around the 88 characters.
  if (text.size() != 88 || text[86] != '=' || text[87] != '=') return std::nullopt;
  for (std::size_t i = 0; i < 86; ++i) {
    char c = text[i];
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
    if (!ok) return std::nullopt;
  }
  auto raw = base64Decode(text);
  if (!raw || raw->size() != crypto_sign_BYTES) return std::nullopt;
  return raw;
}

std::string randomToken(std::size_t n) {
  std::string raw(n, '\0');
  randombytes_buf(&raw[0], n);
  std::string out(sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_URLSAFE_NO_PADDING), '\0');
  sodium_bin2base64(&out[0], out.size(), bytes(raw), n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  out.resize(out.size() - 1);
  return out;
}

std::string randomNonce() { return randomToken(18); }

bool constantTimeEquals(const std::string& a, const std::string& b) {
  return a.size() == b.size() && (a.empty() || sodium_memcmp(a.data(), b.data(), a.size()) == 0);
}

std::string canonicalRequest(const std::string& method, const std::string& path, const std::string& timestamp,
                             const std::string& nonce, const std::string& body) {
  std::string m = method;
  for (auto& c : m) c = static_cast<char>((c >= 'a' && c <= 'z') ? c - 32 : c);
  return m + "\n" + path + "\n" + timestamp + "\n" + nonce + "\n" + sha256Hex(body);
}

std::string requestSignature(const std::string& apiSecret, const std::string& canonical) {
  return toHex(hmacSha256Raw(apiSecret, canonical));
}

std::string responseMessage(const std::string& kid, const std::string& method, const std::string& path, int status,
                            const std::string& timestamp, const std::string& nonce, const std::string& body) {
  std::string m = method;
  for (auto& c : m) c = static_cast<char>((c >= 'a' && c <= 'z') ? c - 32 : c);
  return "kw1\n" + kid + "\n" + m + "\n" + path + "\n" + std::to_string(status) + "\n" + timestamp + "\n" + nonce +
         "\n" + sha256Hex(body);
}

bool ed25519Verify(const std::string& publicKey, const std::string& message, const std::string& signature) {
  if (publicKey.size() != crypto_sign_PUBLICKEYBYTES || signature.size() != crypto_sign_BYTES) return false;
  return crypto_sign_verify_detached(bytes(signature), bytes(message), message.size(), bytes(publicKey)) == 0;
}

std::string startProof(const std::string& session, const std::string& systemId, const std::string& token) {
  return base64Encode(hmacSha256Raw(session, "kwhs1\n" + systemId + "\n" + token));
}

std::string beatProof(const std::string& previousToken, const std::string& session, std::int64_t beatIndex,
                      const std::string& newToken, std::int64_t beatCount) {
  return base64Encode(hmacSha256Raw(previousToken, "kwhb1\n" + session + "\n" + std::to_string(beatIndex) + "\n" +
                                                       newToken + "\n" + std::to_string(beatCount)));
}

std::string encryptionKey(const std::string& encKey, const std::string& apiSecret) {
  return sha256Raw(encKey + "-" + apiSecret);
}

std::string encryptionIv(const std::string& initIv) { return sha256Raw(initIv).substr(0, 16); }

std::optional<std::string> decryptResponse(const std::string& ciphertextB64, const std::string& encKey,
                                           const std::string& apiSecret, const std::string& initIv) {
  auto raw = base64Decode(ciphertextB64);
  if (!raw) return std::nullopt;
  return aes256CbcDecrypt(encryptionKey(encKey, apiSecret), encryptionIv(initIv), *raw);
}

}  // namespace keywarden::detail
