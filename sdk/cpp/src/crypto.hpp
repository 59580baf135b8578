// docs/protocol.md 3-6 with libsodium (and the vendored AES of aes256.hpp). Each function matches one
// file of sdk/vectors. Internal: not part of the installed API, but the tests include it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace keywarden::detail {

/** sodium_init once per process; throws keywarden::Error(server) if libsodium cannot start. */
void ensureSodium();

std::string sha256Raw(const std::string& data);
std::string sha256Hex(const std::string& data);
std::string hmacSha256Raw(const std::string& key, const std::string& message);
std::string toHex(const std::string& raw);
std::string base64Encode(const std::string& raw);
/** Standard padded base64; nullopt on anything else. */
std::optional<std::string> base64Decode(const std::string& text);
/** Strict: exactly base64 of 64 bytes (`[A-Za-z0-9+/]{86}==`), else nullopt. */
std::optional<std::string> decodeSignature(const std::string& text);
/** 18 random bytes, base64url without padding (24 chars of [A-Za-z0-9_-], docs/protocol.md 3 allows 16-64). */
std::string randomNonce();
/** n random bytes, base64url without padding. */
std::string randomToken(std::size_t bytes);
/** Constant-time string equality (lengths may leak). */
bool constantTimeEquals(const std::string& a, const std::string& b);

/** docs/protocol.md 3: METHOD \n PATH \n X-Timestamp \n X-Nonce \n hex(sha256(body)). */
std::string canonicalRequest(const std::string& method, const std::string& path, const std::string& timestamp,
                             const std::string& nonce, const std::string& body);
std::string requestSignature(const std::string& apiSecret, const std::string& canonical);

/** docs/protocol.md 4: kw1 \n KID \n METHOD \n PATH \n STATUS \n TS \n NONCE \n hex(sha256(body)). */
std::string responseMessage(const std::string& kid, const std::string& method, const std::string& path, int status,
                            const std::string& timestamp, const std::string& nonce, const std::string& body);
/** Ed25519 over message; publicKey 32 raw bytes, signature 64 raw bytes. */
bool ed25519Verify(const std::string& publicKey, const std::string& message, const std::string& signature);

/** docs/protocol.md 6. */
std::string startProof(const std::string& session, const std::string& systemId, const std::string& token);
std::string beatProof(const std::string& previousToken, const std::string& session, std::int64_t beatIndex,
                      const std::string& newToken, std::int64_t beatCount);

/** SHA-1 (raw 20 bytes): only for the WebSocket handshake's Sec-WebSocket-Accept (RFC 6455), never for security. */
std::string sha1Raw(const std::string& data);
/** base64url without padding. */
std::string base64UrlEncode(const std::string& raw);
/** base64url, padding optional; nullopt on anything else. */
std::optional<std::string> base64UrlDecode(const std::string& text);
/** n random bytes. */
std::string randomBytes(std::size_t n);
/** X25519 public key (32 raw bytes) of a 32-byte secret. */
std::string x25519Public(const std::string& secret);
/** X25519(secret, peer public key); nullopt for a bad length or an all-zero result (low-order key). */
std::optional<std::string> x25519(const std::string& secret, const std::string& peerPublic);
/** HKDF-SHA256 (RFC 5869). */
std::string hkdfSha256(const std::string& ikm, const std::string& salt, const std::string& info, std::size_t length);

/** docs/protocol.md 5 key and iv. */
std::string encryptionKey(const std::string& encKey, const std::string& apiSecret);
std::string encryptionIv(const std::string& initIv);
/** docs/protocol.md 5: plaintext of base64 ciphertext; nullopt on bad base64, bad length or bad padding. */
std::optional<std::string> decryptResponse(const std::string& ciphertextB64, const std::string& encKey,
                                           const std::string& apiSecret, const std::string& initIv);

}  // namespace keywarden::detail
