// The realtime channel's wire format (the server's docs/protocol.md, "Realtime channel"), pure functions
// checked against sdk/vectors/channel.json (tests/test-channel.cpp): the hello's transcript and
// verification, the X25519 + HKDF-SHA256 keys, and the MAC'd, sequenced frames.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "internal.hpp"

namespace keywarden::detail {

inline constexpr const char* kChannelPath = "/api/client/ws";

struct ChannelKeys {
  std::string s2c;  // server -> client MAC key, 32 bytes
  std::string c2s;  // client -> server MAC key, 32 bytes
};

/** "kwc1-hello" \n kid \n ts \n session \n client_key \n server_key \n conn \n beat_interval. */
std::string channelTranscript(const std::string& kid, std::int64_t ts, const std::string& session, const std::string& clientKey,
                              const std::string& serverKey, const std::string& conn, std::int64_t beatInterval);

/** okm = HKDF-SHA256(X25519(secret, server key), sha256(transcript), "kwc1 keys", 64); nullopt for an unusable key. */
std::optional<ChannelKeys> channelKeys(const std::string& secret, const std::string& serverKeyB64Url, const std::string& transcript);

/** HMAC-SHA256(key, payload) || payload. */
std::string sealFrame(const std::string& key, const std::string& payload);
/** The payload when the MAC verifies (constant time), else nullopt (also for 32 bytes or fewer). */
std::optional<std::string> openFrame(const std::string& key, const std::string& frame);

/**
 * Verifies the hello as the client whose session and key made the upgrade and derives the keys.
 * Checks in order (sdk/vectors/channel.json): malformed, unknown_kid, bad_base64, stale, bad_signature.
 * Throws Error(verification).
 */
ChannelKeys verifyChannelHello(const PinnedKeys& keys, std::int64_t nowMs, const std::string& session,
                               const std::string& clientKey, const std::string& secret, const std::string& hello);

/** One server frame judged alone: MAC (bad_mac), JSON object (malformed), seq (out_of_order). */
struct FrameVerdict {
  nlohmann::json message;  // when reason is empty
  std::string reason;
  std::string what;
};
FrameVerdict readChannelFrame(const std::string& s2c, std::int64_t expectedSeq, const std::string& frame, bool binary);

}  // namespace keywarden::detail
