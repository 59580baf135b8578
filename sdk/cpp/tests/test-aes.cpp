// The vendored AES-256 against the standards' known answers (the vectors' own cases are in test-vectors).
#include "aes256.hpp"
#include "crypto.hpp"
#include "runner.hpp"

namespace d = keywarden::detail;

namespace {
std::string unhex(const std::string& h) {
  std::string out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}
}  // namespace

KW_TEST(aes_fips197, "aes/FIPS-197 C.3 block encrypt and decrypt") {
  std::string key = unhex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
  std::string plain = unhex("00112233445566778899aabbccddeeff");
  d::Aes256 aes(reinterpret_cast<const std::uint8_t*>(key.data()));
  std::uint8_t out[16], back[16];
  aes.encryptBlock(reinterpret_cast<const std::uint8_t*>(plain.data()), out);
  CHECK_EQ(d::toHex(std::string(reinterpret_cast<char*>(out), 16)), std::string("8ea2b7ca516745bfeafc49904b496089"));
  aes.decryptBlock(out, back);
  CHECK_EQ(std::string(reinterpret_cast<char*>(back), 16), plain);
}

KW_TEST(aes_sp800_38a, "aes/SP 800-38A F.2.5 and F.2.6 (CBC-AES256)") {
  std::string key = unhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4");
  std::string iv = unhex("000102030405060708090a0b0c0d0e0f");
  std::string plain = unhex(
      "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710");
  std::string expected =
      "f58c4c04d6e5f1ba779eabfb5f7bfbd69cfc4e967edb808d679f777bc6702c7d39f23369a9d9bacfa530e26304231461b2eb05e2c39be9fcda6c19078c6a9d1b";
  std::string cipher = d::aes256CbcEncrypt(key, iv, plain);
  CHECK_EQ(cipher.size(), std::size_t{80});  // 64 bytes + one block of PKCS#7 padding
  CHECK_EQ(d::toHex(cipher.substr(0, 64)), expected);
  auto back = d::aes256CbcDecrypt(key, iv, cipher);
  CHECK(back.has_value());
  CHECK_EQ(*back, plain);
}

KW_TEST(aes_padding, "aes/round trips every length; refuses bad padding and bad lengths") {
  std::string key(32, 'k'), iv(16, 'i');
  for (std::size_t n = 0; n <= 40; ++n) {
    std::string plain(n, static_cast<char>('a' + n % 26));
    std::string cipher = d::aes256CbcEncrypt(key, iv, plain);
    CHECK_EQ(cipher.size() % 16, std::size_t{0});
    CHECK(cipher.size() > n);
    CHECK(d::aes256CbcDecrypt(key, iv, cipher) == plain);
  }
  std::string cipher = d::aes256CbcEncrypt(key, iv, "hello");
  std::string broken = cipher;
  broken[broken.size() - 1] ^= 0x55;  // the last block decrypts to garbage: padding check fails
  CHECK(!d::aes256CbcDecrypt(key, iv, broken).has_value());
  CHECK(!d::aes256CbcDecrypt(key, iv, cipher.substr(0, 15)).has_value());
  CHECK(!d::aes256CbcDecrypt(key, iv, "").has_value());
  CHECK(!d::aes256CbcDecrypt(key, iv.substr(0, 8), cipher).has_value());
  CHECK(!d::decryptResponse("%%%not base64", "a", "b", "c").has_value());
}
