// sdk/vectors: the same bytes the server produces (docs/protocol.md 3-6).
#include "aes256.hpp"
#include "crypto.hpp"
#include "internal.hpp"
#include "runner.hpp"
#include "support.hpp"

namespace d = keywarden::detail;

KW_TEST(request_signatures, "vectors/request signatures") {
  auto v = kwtest::vectors("request-signatures.json");
  CHECK(v["cases"].size() >= 1);
  for (const auto& c : v["cases"]) {
    std::string canonical = d::canonicalRequest(c["method"], c["path"], c["timestamp"], c["nonce"], c["body"]);
    CHECK_EQ(canonical, c["canonical"].get<std::string>());
    CHECK_EQ(d::requestSignature(c["api_secret"], canonical), c["signature"].get<std::string>());
  }
}

KW_TEST(response_signatures, "vectors/response signatures: valid ones verify, the rest are refused for their reason") {
  auto v = kwtest::vectors("response-signatures.json");
  std::vector<keywarden::ResponseKey> pinned;
  for (const auto& k : v["pinned_keys"]) pinned.push_back({k["kid"], k["public_key"]});
  auto keys = d::pinKeys(pinned);
  std::int64_t window = v["max_skew_seconds"].get<std::int64_t>();
  CHECK_EQ(window, 300);
  int valid = 0, refused = 0;
  for (const auto& c : v["cases"]) {
    const std::string name = c["name"];
    std::string message = d::responseMessage(c["kid"], c["method"], c["path"], c["status"].get<int>(), c["timestamp"],
                                             c["nonce"], c["body"]);
    CHECK_MSG(message == c["message"].get<std::string>(), name);
    std::map<std::string, std::string> headers = {{"x-response-kid", c["kid"]},
                                                  {"x-response-timestamp", c["timestamp"]},
                                                  {"x-response-signature", c["signature"]}};
    std::string body = c["body"];
    d::SignedAnswer a{c["method"], c["path"], c["status"].get<int>(), &headers, &body, c["nonce"]};
    std::int64_t nowMs = c["now"].get<std::int64_t>() * 1000;
    if (c["valid"].get<bool>()) {
      CHECK_EQ(d::verifyResponse(keys, a, nowMs, window), std::stoll(c["timestamp"].get<std::string>()) * 1000);
      ++valid;
    } else {
      auto e = EXPECT_ERROR(d::verifyResponse(keys, a, nowMs, window));
      CHECK_EQ(e.code(), keywarden::ErrorCode::verification);
      CHECK_MSG(e.reason() == c["verification_reason"].get<std::string>(), name + ": got " + e.reason());
      ++refused;
    }
  }
  CHECK(valid >= 2);
  CHECK(refused >= 5);
}

KW_TEST(missing_headers, "vectors/a missing signature header is unsigned") {
  auto v = kwtest::vectors("response-signatures.json");
  const auto& c = v["cases"][0];
  auto keys = d::pinKeys({{v["pinned_keys"][0]["kid"], v["pinned_keys"][0]["public_key"]}});
  std::string body = c["body"];
  for (const char* drop : {"x-response-kid", "x-response-timestamp", "x-response-signature"}) {
    std::map<std::string, std::string> headers = {{"x-response-kid", c["kid"]},
                                                  {"x-response-timestamp", c["timestamp"]},
                                                  {"x-response-signature", c["signature"]}};
    headers.erase(drop);
    d::SignedAnswer a{"POST", c["path"], c["status"].get<int>(), &headers, &body, c["nonce"]};
    CHECK_EQ(EXPECT_ERROR(d::verifyResponse(keys, a, c["now"].get<std::int64_t>() * 1000, 300)).reason(), std::string("unsigned"));
  }
}

KW_TEST(proofs, "vectors/heartbeat proofs") {
  auto v = kwtest::vectors("proofs.json");
  for (const auto& c : v["start"]) CHECK_EQ(d::startProof(c["session"], c["system_id"], c["token"]), c["proof"].get<std::string>());
  bool sawBig = false;
  for (const auto& c : v["beat"]) {
    std::int64_t index = c["beat_index"].get<std::int64_t>();
    sawBig = sawBig || index == (std::int64_t{1} << 31);
    CHECK_EQ(d::beatProof(c["previous_token"], c["session"], index, c["new_token"], c["beat_count"].get<std::int64_t>()),
             c["proof"].get<std::string>());
  }
  CHECK(sawBig);
}

KW_TEST(encryption, "vectors/response decryption (AES-256-CBC)") {
  auto v = kwtest::vectors("encryption.json");
  CHECK(v["cases"].size() >= 1);
  for (const auto& c : v["cases"]) {
    CHECK_EQ(d::toHex(d::encryptionKey(c["enc_key"], c["api_secret"])), c["key_hex"].get<std::string>());
    CHECK_EQ(d::toHex(d::encryptionIv(c["init_iv"])), c["iv_hex"].get<std::string>());
    auto plain = d::decryptResponse(c["ciphertext"], c["enc_key"], c["api_secret"], c["init_iv"]);
    CHECK(plain.has_value());
    CHECK_EQ(*plain, c["plaintext"].get<std::string>());
    // and the other direction, byte for byte
    std::string cipher = d::aes256CbcEncrypt(d::encryptionKey(c["enc_key"], c["api_secret"]), d::encryptionIv(c["init_iv"]), c["plaintext"]);
    CHECK_EQ(d::base64Encode(cipher), c["ciphertext"].get<std::string>());
    CHECK(!d::decryptResponse(c["ciphertext"], c["enc_key"], "another secret", c["init_iv"]).has_value() ||
          *d::decryptResponse(c["ciphertext"], c["enc_key"], "another secret", c["init_iv"]) != c["plaintext"].get<std::string>());
  }
}
