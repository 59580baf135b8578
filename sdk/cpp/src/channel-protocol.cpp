#include "channel-protocol.hpp"

#include <cstdlib>

#include "crypto.hpp"

namespace keywarden::detail {

namespace {
constexpr std::int64_t kWindowMs = 300 * 1000;
constexpr std::size_t kMacBytes = 32;
}  // namespace

std::string channelTranscript(const std::string& kid, std::int64_t ts, const std::string& session, const std::string& clientKey,
                              const std::string& serverKey, const std::string& conn, std::int64_t beatInterval) {
  return "kwc1-hello\n" + kid + "\n" + std::to_string(ts) + "\n" + session + "\n" + clientKey + "\n" + serverKey + "\n" + conn +
         "\n" + std::to_string(beatInterval);
}

std::optional<ChannelKeys> channelKeys(const std::string& secret, const std::string& serverKeyB64Url, const std::string& transcript) {
  auto peer = base64UrlDecode(serverKeyB64Url);
  if (!peer || peer->size() != 32) return std::nullopt;
  auto shared = x25519(secret, *peer);
  if (!shared) return std::nullopt;
  std::string okm = hkdfSha256(*shared, sha256Raw(transcript), "kwc1 keys", 64);
  return ChannelKeys{okm.substr(0, 32), okm.substr(32, 32)};
}

std::string sealFrame(const std::string& key, const std::string& payload) { return hmacSha256Raw(key, payload) + payload; }

std::optional<std::string> openFrame(const std::string& key, const std::string& frame) {
  if (frame.size() <= kMacBytes) return std::nullopt;
  std::string payload = frame.substr(kMacBytes);
  if (!constantTimeEquals(hmacSha256Raw(key, payload), frame.substr(0, kMacBytes))) return std::nullopt;
  return payload;
}

ChannelKeys verifyChannelHello(const PinnedKeys& keys, std::int64_t nowMs, const std::string& session,
                               const std::string& clientKey, const std::string& secret, const std::string& hello) {
  nlohmann::json h = nlohmann::json::parse(hello, nullptr, false);
  if (h.is_discarded()) throw verificationError("malformed", "channel hello is not JSON");
  auto str = [&](const char* k) { return h.is_object() && h.contains(k) && h[k].is_string(); };
  auto integer = [&](const char* k) { return h.is_object() && h.contains(k) && h[k].is_number_integer(); };
  if (!h.is_object() || !str("type") || h["type"] != "hello" || !str("kid") || !str("sig") || !str("server_key") || !str("conn") ||
      !integer("ts") || !integer("beat_interval"))
    throw verificationError("malformed", "channel hello lacks fields");
  const std::string kid = h["kid"].get<std::string>();
  auto key = keys.find(kid);
  if (key == keys.end()) throw verificationError("unknown_kid", "channel hello signed by unpinned key " + kid);
  auto sig = decodeSignature(h["sig"].get<std::string>());
  if (!sig) throw verificationError("bad_base64", "channel hello signature is not base64 of 64 bytes");
  const std::int64_t ts = h["ts"].get<std::int64_t>();
  if (ts > 9'000'000'000'000LL || ts < -9'000'000'000'000LL || std::llabs(ts * 1000 - nowMs) > kWindowMs)
    throw verificationError("stale", "channel hello timestamp " + std::to_string(ts) + " is off");
  const std::string serverKey = h["server_key"].get<std::string>();
  const std::string transcript = channelTranscript(kid, ts, session, clientKey, serverKey, h["conn"].get<std::string>(),
                                                   h["beat_interval"].get<std::int64_t>());
  if (!ed25519Verify(key->second, transcript, *sig)) throw verificationError("bad_signature", "channel hello does not verify");
  auto k = channelKeys(secret, serverKey, transcript);
  if (!k) throw verificationError("malformed", "channel hello carries an unusable server key");
  return *k;
}

FrameVerdict readChannelFrame(const std::string& s2c, std::int64_t expectedSeq, const std::string& frame, bool binary) {
  if (!binary) return {nullptr, "malformed", "text frame after the hello"};
  auto payload = openFrame(s2c, frame);
  if (!payload) return {nullptr, "bad_mac", "channel frame MAC does not verify"};
  nlohmann::json m = nlohmann::json::parse(*payload, nullptr, false);
  if (m.is_discarded() || !m.is_object()) return {nullptr, "malformed", "channel frame is not a JSON object"};
  auto seq = m.find("seq");
  if (seq == m.end() || !seq->is_number_integer() || seq->get<std::int64_t>() != expectedSeq)
    return {nullptr, "out_of_order",
            "channel frame " + (seq == m.end() ? std::string("without seq") : seq->dump()) + " where " + std::to_string(expectedSeq) +
                " was due"};
  return {std::move(m), "", ""};
}

}  // namespace keywarden::detail
