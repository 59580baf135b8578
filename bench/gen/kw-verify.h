// Client-side checks for kwload (libsodium), included by kwload.c: what an SDK checks before it
// trusts an answer, done on a sample of answers (--verify F) so that a proxy that alters answers or
// a deployment signing with another key than the one the client pins shows up in the counts.
//   response signature (docs/protocol.md 4): Ed25519 over
//     "kw1\n" kid "\n" METHOD "\n" PATH "\n" STATUS "\n" timestamp "\n" request nonce "\n" hex(sha256(body))
//   heartbeat proofs (docs/protocol.md 6): start  HMAC-SHA256(key = session, "kwhs1\n" system_id "\n" token)
//                                  beat   HMAC-SHA256(key = previous token,
//                                           "kwhb1\n" session "\n" beat_index "\n" new_token "\n" beat_count)
//   channel (README "Realtime channel"): the hello's Ed25519 signature over its transcript and the
//     HMAC-SHA256 (s2c key) in front of every server frame.
// And what a client of an application with require_signature sends (docs/protocol.md 3):
//   X-Signature = hex(HMAC-SHA256(key = api_secret, METHOD "\n" PATH "\n" X-Timestamp "\n" X-Nonce "\n" hex(sha256(body))))
#ifdef KW_WS
#include <time.h>

static unsigned char vk_pub[32]; // the pinned response-signing key (--public-key)
static const char *vk_kid = "k1";

static void hex_of(const unsigned char *in, size_t n, char *out) {
  static const char d[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) out[2 * i] = d[in[i] >> 4], out[2 * i + 1] = d[in[i] & 15];
  out[2 * n] = 0;
}

static void hmac_sha256(const void *key, size_t klen, const void *msg, size_t mlen, unsigned char out[32]) {
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, key, klen); // any key length (HMAC hashes long keys itself)
  crypto_auth_hmacsha256_update(&st, msg, mlen);
  crypto_auth_hmacsha256_final(&st, out);
}

/** docs/protocol.md 3: the X-Signature of a request (65 bytes of hex with its NUL). */
static void request_signature(const char *secret, const char *method, const char *path, long ts, const char *nonce,
                              const char *body, size_t blen, char out[65]) {
  unsigned char h[32], mac[32];
  char hh[65], canon[1024];
  crypto_hash_sha256(h, (const unsigned char *)body, blen);
  hex_of(h, 32, hh);
  int n = snprintf(canon, sizeof canon, "%s\n%s\n%ld\n%s\n%s", method, path, ts, nonce, hh);
  hmac_sha256(secret, strlen(secret), canon, (size_t)n, mac);
  hex_of(mac, 32, out);
}

/** Sets the pinned key from base64 (standard alphabet, as GET /api/client/keys gives it). */
static int set_public_key(const char *b64) {
  size_t len = 0;
  if (sodium_base642bin(vk_pub, sizeof vk_pub, b64, strlen(b64), NULL, &len, NULL, sodium_base64_VARIANT_ORIGINAL) != 0 || len != 32)
    return -1;
  return 0;
}

/** docs/protocol.md 4. Returns NULL when the answer verifies, else why not. */
static const char *check_reply_signature(const char *kid, const char *ts, const char *sig, const char *method, const char *path,
                                         int status, const char *nonce, const char *body, size_t blen) {
  if (!*sig) return "unsigned answer";
  if (strcmp(kid, vk_kid) != 0) return "unknown kid";
  long t = atol(ts);
  long now = (long)time(NULL);
  if (!*ts || t - now > 300 || now - t > 300) return "timestamp more than 300 s off";
  unsigned char s[64], h[32];
  size_t slen = 0;
  if (sodium_base642bin(s, sizeof s, sig, strlen(sig), NULL, &slen, NULL, sodium_base64_VARIANT_ORIGINAL) != 0 || slen != 64)
    return "signature is not base64 of 64 bytes";
  char hh[65], msg[1024];
  crypto_hash_sha256(h, (const unsigned char *)body, blen);
  hex_of(h, 32, hh);
  int n = snprintf(msg, sizeof msg, "kw1\n%s\n%s\n%s\n%d\n%s\n%s\n%s", kid, method, path, status, ts, nonce, hh);
  if (crypto_sign_verify_detached(s, (const unsigned char *)msg, (unsigned long long)n, vk_pub) != 0) return "signature does not verify";
  return NULL;
}

static int proof_equals(const unsigned char mac[32], const char *proof) {
  char b64[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_ORIGINAL)];
  sodium_bin2base64(b64, sizeof b64, mac, 32, sodium_base64_VARIANT_ORIGINAL);
  return strcmp(b64, proof) == 0;
}

static int check_start_proof(const char *session, const char *system_id, const char *token, const char *proof) {
  char m[1024];
  unsigned char mac[32];
  int n = snprintf(m, sizeof m, "kwhs1\n%s\n%s", system_id, token);
  hmac_sha256(session, strlen(session), m, (size_t)n, mac);
  return proof_equals(mac, proof);
}

static int check_beat_proof(const char *prev_token, const char *session, unsigned long long beat_index, const char *new_token,
                            const char *beat_count, const char *proof) {
  char m[1024];
  unsigned char mac[32];
  int n = snprintf(m, sizeof m, "kwhb1\n%s\n%llu\n%s\n%s", session, beat_index, new_token, beat_count);
  hmac_sha256(prev_token, strlen(prev_token), m, (size_t)n, mac);
  return proof_equals(mac, proof);
}

/** The hello's signature over its transcript (built with this connection's own session and key). */
static const char *check_hello(const char *kid, const char *ts, const char *sig, const char *transcript, size_t tlen) {
  if (strcmp(kid, vk_kid) != 0) return "hello: unknown kid";
  long t = atol(ts), now = (long)time(NULL);
  if (t - now > 300 || now - t > 300) return "hello: timestamp more than 300 s off";
  unsigned char s[64];
  size_t slen = 0;
  if (sodium_base642bin(s, sizeof s, sig, strlen(sig), NULL, &slen, NULL, sodium_base64_VARIANT_ORIGINAL) != 0 || slen != 64)
    return "hello: sig is not base64 of 64 bytes";
  if (crypto_sign_verify_detached(s, (const unsigned char *)transcript, (unsigned long long)tlen, vk_pub) != 0)
    return "hello: signature does not verify";
  return NULL;
}

static int check_frame_mac(const unsigned char key[32], const unsigned char *frame, size_t len) {
  unsigned char mac[32];
  if (len < 32) return 0;
  hmac_sha256(key, 32, frame + 32, len - 32, mac);
  return sodium_memcmp(mac, frame, 32) == 0;
}
#endif
