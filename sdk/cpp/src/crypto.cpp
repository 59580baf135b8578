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

std::string sha1Raw(const std::string& data) {
  // FIPS 180-4; libsodium has no SHA-1 and RFC 6455 fixes it for the handshake.
  std::uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u};
  std::string m = data;
  const std::uint64_t bits = static_cast<std::uint64_t>(data.size()) * 8;
  m.push_back(static_cast<char>(0x80));
  while (m.size() % 64 != 56) m.push_back('\0');
  for (int i = 7; i >= 0; --i) m.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  auto rol = [](std::uint32_t x, int n) { return (x << n) | (x >> (32 - n)); };
  for (std::size_t off = 0; off < m.size(); off += 64) {
    std::uint32_t w[80];
    for (int i = 0; i < 16; ++i)
      w[i] = (static_cast<std::uint32_t>(static_cast<unsigned char>(m[off + 4 * i])) << 24) |
             (static_cast<std::uint32_t>(static_cast<unsigned char>(m[off + 4 * i + 1])) << 16) |
             (static_cast<std::uint32_t>(static_cast<unsigned char>(m[off + 4 * i + 2])) << 8) |
             static_cast<std::uint32_t>(static_cast<unsigned char>(m[off + 4 * i + 3]));
    for (int i = 16; i < 80; ++i) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; ++i) {
      std::uint32_t f, k;
      if (i < 20) f = (b & c) | (~b & d), k = 0x5A827999u;
      else if (i < 40) f = b ^ c ^ d, k = 0x6ED9EBA1u;
      else if (i < 60) f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDCu;
      else f = b ^ c ^ d, k = 0xCA62C1D6u;
      std::uint32_t t = rol(a, 5) + f + e + k + w[i];
      e = d;
      d = c;
      c = rol(b, 30);
      b = a;
      a = t;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
  }
  std::string out;
  for (std::uint32_t v : h)
    for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}

std::string base64UrlEncode(const std::string& raw) {
  std::string out(sodium_base64_ENCODED_LEN(raw.size(), sodium_base64_VARIANT_URLSAFE_NO_PADDING), '\0');
  sodium_bin2base64(&out[0], out.size(), bytes(raw), raw.size(), sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  out.resize(out.size() - 1);  // the terminating NUL
  return out;
}

std::optional<std::string> base64UrlDecode(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '=') t.pop_back();
  std::string out(t.size() / 4 * 3 + 3, '\0');
  std::size_t len = 0;
  const char* end = nullptr;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(&out[0]), out.size(), t.c_str(), t.size(), nullptr, &len, &end,
                        sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
      end != t.c_str() + t.size())
    return std::nullopt;
  out.resize(len);
  return out;
}

std::string randomBytes(std::size_t n) {
  std::string out(n, '\0');
  randombytes_buf(&out[0], n);
  return out;
}

std::string x25519Public(const std::string& secret) {
  if (secret.size() != crypto_scalarmult_SCALARBYTES) throw Error(ErrorCode::server, "an X25519 secret is 32 bytes");
  std::string out(crypto_scalarmult_BYTES, '\0');
  crypto_scalarmult_base(reinterpret_cast<unsigned char*>(&out[0]), bytes(secret));
  return out;
}

std::optional<std::string> x25519(const std::string& secret, const std::string& peerPublic) {
  if (secret.size() != crypto_scalarmult_SCALARBYTES || peerPublic.size() != crypto_scalarmult_BYTES) return std::nullopt;
  std::string out(crypto_scalarmult_BYTES, '\0');
  if (crypto_scalarmult(reinterpret_cast<unsigned char*>(&out[0]), bytes(secret), bytes(peerPublic)) != 0) return std::nullopt;
  return out;
}

std::string hkdfSha256(const std::string& ikm, const std::string& salt, const std::string& info, std::size_t length) {
  const std::string prk = hmacSha256Raw(salt, ikm);
  std::string okm, previous;
  for (unsigned char i = 1; okm.size() < length; ++i) {
    previous = hmacSha256Raw(prk, previous + info + std::string(1, static_cast<char>(i)));
    okm += previous;
  }
  okm.resize(length);
  return okm;
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
