// A small vendored AES-256 (FIPS-197) with CBC and PKCS#7, for docs/protocol.md 5 response decryption.
//
// Why vendored and not OpenSSL's EVP: libsodium has no AES-CBC, and libcurl is not built on
// OpenSSL everywhere this SDK must build (Windows curl uses Schannel, macOS's system curl
// SecureTransport/LibreSSL without headers), so OpenSSL would become a third dependency on those
// platforms. Why a plain table implementation is acceptable here: the key it handles is derived
// from the enc_key and api_secret the host program itself holds (anyone able to time this code on
// the machine can read the key from memory), and the ciphertext is only decrypted after the
// response's Ed25519 signature over it verified, so there is no padding oracle to query.
// Tested against FIPS-197 C.3, SP 800-38A F.2.5/F.2.6 and sdk/vectors/encryption.json.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace keywarden::detail {

class Aes256 {
 public:
  explicit Aes256(const std::uint8_t key[32]);
  void encryptBlock(const std::uint8_t in[16], std::uint8_t out[16]) const;
  void decryptBlock(const std::uint8_t in[16], std::uint8_t out[16]) const;

 private:
  std::array<std::uint8_t, 240> roundKeys_{};  // 15 round keys of 16 bytes
};

/** CBC + PKCS#7. key 32 bytes, iv 16 bytes (raw strings). */
std::string aes256CbcEncrypt(const std::string& key, const std::string& iv, const std::string& plaintext);
/** nullopt when the length is not a positive multiple of 16 or the padding is wrong. */
std::optional<std::string> aes256CbcDecrypt(const std::string& key, const std::string& iv, const std::string& ciphertext);

}  // namespace keywarden::detail
