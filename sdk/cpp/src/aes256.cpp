// AES-256 per FIPS-197 (see aes256.hpp for why it is vendored). The S-box is derived at first use
// from its definition (GF(2^8) inverse + affine map) rather than typed in, so a typo cannot hide
// in a 256-entry table; the known-answer tests pin the result.
#include "aes256.hpp"

#include <cstring>

namespace keywarden::detail {
namespace {

struct Tables {
  std::uint8_t sbox[256];
  std::uint8_t inv[256];
  Tables() {
    auto rotl = [](std::uint8_t x, int s) { return static_cast<std::uint8_t>((x << s) | (x >> (8 - s))); };
    std::uint8_t p = 1, q = 1;
    do {
      // p walks the multiplicative group by 3; q = p^-1 walks it by 3^-1.
      p = static_cast<std::uint8_t>(p ^ (p << 1) ^ ((p & 0x80) ? 0x1B : 0));
      q = static_cast<std::uint8_t>(q ^ (q << 1));
      q = static_cast<std::uint8_t>(q ^ (q << 2));
      q = static_cast<std::uint8_t>(q ^ (q << 4));
      if (q & 0x80) q ^= 0x09;
      std::uint8_t x = static_cast<std::uint8_t>(q ^ rotl(q, 1) ^ rotl(q, 2) ^ rotl(q, 3) ^ rotl(q, 4));
      sbox[p] = static_cast<std::uint8_t>(x ^ 0x63);
    } while (p != 1);
    sbox[0] = 0x63;
    for (int i = 0; i < 256; ++i) inv[sbox[i]] = static_cast<std::uint8_t>(i);
  }
};

const Tables& tables() {
  static const Tables t;  // thread-safe initialisation (C++11 magic statics)
  return t;
}

std::uint8_t xtime(std::uint8_t x) { return static_cast<std::uint8_t>((x << 1) ^ ((x & 0x80) ? 0x1B : 0)); }

std::uint8_t gmul(std::uint8_t a, std::uint8_t b) {
  std::uint8_t r = 0;
  while (b) {
    if (b & 1) r ^= a;
    a = xtime(a);
    b >>= 1;
  }
  return r;
}

void addRoundKey(std::uint8_t s[16], const std::uint8_t* k) {
  for (int i = 0; i < 16; ++i) s[i] ^= k[i];
}

}  // namespace

Aes256::Aes256(const std::uint8_t key[32]) {
  const auto& t = tables();
  std::memcpy(roundKeys_.data(), key, 32);
  std::uint8_t rcon = 1;
  for (std::size_t i = 8; i < 60; ++i) {
    std::uint8_t w[4];
    std::memcpy(w, &roundKeys_[(i - 1) * 4], 4);
    if (i % 8 == 0) {
      std::uint8_t first = w[0];
      w[0] = static_cast<std::uint8_t>(t.sbox[w[1]] ^ rcon);
      w[1] = t.sbox[w[2]];
      w[2] = t.sbox[w[3]];
      w[3] = t.sbox[first];
      rcon = xtime(rcon);
    } else if (i % 8 == 4) {
      for (auto& b : w) b = t.sbox[b];
    }
    for (std::size_t j = 0; j < 4; ++j) roundKeys_[i * 4 + j] = static_cast<std::uint8_t>(roundKeys_[(i - 8) * 4 + j] ^ w[j]);
  }
}

void Aes256::encryptBlock(const std::uint8_t in[16], std::uint8_t out[16]) const {
  const auto& t = tables();
  std::uint8_t s[16];
  std::memcpy(s, in, 16);
  addRoundKey(s, &roundKeys_[0]);
  for (std::size_t round = 1; round <= 14; ++round) {
    std::uint8_t n[16];
    for (int c = 0; c < 4; ++c)
      for (int r = 0; r < 4; ++r) n[r + 4 * c] = t.sbox[s[r + 4 * ((c + r) % 4)]];  // SubBytes + ShiftRows
    if (round != 14) {
      for (int c = 0; c < 4; ++c) {  // MixColumns
        std::uint8_t* a = &n[4 * c];
        std::uint8_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
        a[0] = static_cast<std::uint8_t>(xtime(a0) ^ (xtime(a1) ^ a1) ^ a2 ^ a3);
        a[1] = static_cast<std::uint8_t>(a0 ^ xtime(a1) ^ (xtime(a2) ^ a2) ^ a3);
        a[2] = static_cast<std::uint8_t>(a0 ^ a1 ^ xtime(a2) ^ (xtime(a3) ^ a3));
        a[3] = static_cast<std::uint8_t>((xtime(a0) ^ a0) ^ a1 ^ a2 ^ xtime(a3));
      }
    }
    addRoundKey(n, &roundKeys_[round * 16]);
    std::memcpy(s, n, 16);
  }
  std::memcpy(out, s, 16);
}

void Aes256::decryptBlock(const std::uint8_t in[16], std::uint8_t out[16]) const {
  const auto& t = tables();
  std::uint8_t s[16];
  std::memcpy(s, in, 16);
  addRoundKey(s, &roundKeys_[14 * 16]);
  for (std::size_t round = 14; round-- > 0;) {  // rounds 13 .. 0
    std::uint8_t n[16];
    for (int c = 0; c < 4; ++c)
      for (int r = 0; r < 4; ++r) n[r + 4 * ((c + r) % 4)] = t.inv[s[r + 4 * c]];  // InvShiftRows + InvSubBytes
    addRoundKey(n, &roundKeys_[round * 16]);
    if (round != 0) {
      for (int c = 0; c < 4; ++c) {  // InvMixColumns
        std::uint8_t* a = &n[4 * c];
        std::uint8_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
        a[0] = static_cast<std::uint8_t>(gmul(a0, 14) ^ gmul(a1, 11) ^ gmul(a2, 13) ^ gmul(a3, 9));
        a[1] = static_cast<std::uint8_t>(gmul(a0, 9) ^ gmul(a1, 14) ^ gmul(a2, 11) ^ gmul(a3, 13));
        a[2] = static_cast<std::uint8_t>(gmul(a0, 13) ^ gmul(a1, 9) ^ gmul(a2, 14) ^ gmul(a3, 11));
        a[3] = static_cast<std::uint8_t>(gmul(a0, 11) ^ gmul(a1, 13) ^ gmul(a2, 9) ^ gmul(a3, 14));
      }
    }
    std::memcpy(s, n, 16);
  }
  std::memcpy(out, s, 16);
}

std::string aes256CbcEncrypt(const std::string& key, const std::string& iv, const std::string& plaintext) {
  Aes256 aes(reinterpret_cast<const std::uint8_t*>(key.data()));
  std::string padded = plaintext;
  std::size_t pad = 16 - (plaintext.size() % 16);
  padded.append(pad, static_cast<char>(pad));
  std::string out(padded.size(), '\0');
  std::uint8_t prev[16];
  std::memcpy(prev, iv.data(), 16);
  for (std::size_t off = 0; off < padded.size(); off += 16) {
    std::uint8_t block[16];
    for (int i = 0; i < 16; ++i) block[i] = static_cast<std::uint8_t>(static_cast<std::uint8_t>(padded[off + i]) ^ prev[i]);
    aes.encryptBlock(block, prev);
    std::memcpy(&out[off], prev, 16);
  }
  return out;
}

std::optional<std::string> aes256CbcDecrypt(const std::string& key, const std::string& iv, const std::string& ciphertext) {
  if (key.size() != 32 || iv.size() != 16 || ciphertext.empty() || ciphertext.size() % 16 != 0) return std::nullopt;
  Aes256 aes(reinterpret_cast<const std::uint8_t*>(key.data()));
  std::string out(ciphertext.size(), '\0');
  const auto* prev = reinterpret_cast<const std::uint8_t*>(iv.data());
  for (std::size_t off = 0; off < ciphertext.size(); off += 16) {
    const auto* block = reinterpret_cast<const std::uint8_t*>(ciphertext.data() + off);
    std::uint8_t plain[16];
    aes.decryptBlock(block, plain);
    for (int i = 0; i < 16; ++i) out[off + i] = static_cast<char>(plain[i] ^ prev[i]);
    prev = block;
  }
  auto pad = static_cast<std::uint8_t>(out.back());
  if (pad < 1 || pad > 16) return std::nullopt;
  for (std::size_t i = out.size() - pad; i < out.size(); ++i)
    if (static_cast<std::uint8_t>(out[i]) != pad) return std::nullopt;
  out.resize(out.size() - pad);
  return out;
}

}  // namespace keywarden::detail
