package keywarden

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The realtime channel's cryptography (the server's docs/protocol.md "Realtime channel";
// sdk/vectors/channel.json).

// ChannelPath is the channel's WebSocket path.
const ChannelPath = "/api/client/ws"

// ChannelTranscript is "kwc1-hello" \n kid \n ts \n session \n client_key \n server_key \n conn \n beat_interval.
func ChannelTranscript(kid string, ts int64, session, clientKey, serverKey, conn string, beatInterval int64) string {
	return strings.Join([]string{"kwc1-hello", kid, strconv.FormatInt(ts, 10), session, clientKey, serverKey, conn,
		strconv.FormatInt(beatInterval, 10)}, "\n")
}

func hkdfSHA256(ikm, salt, info []byte, length int) []byte {
	ext := hmac.New(sha256.New, salt)
	ext.Write(ikm)
	prk := ext.Sum(nil)
	var out, prev []byte
	for i := byte(1); len(out) < length; i++ {
		m := hmac.New(sha256.New, prk)
		m.Write(prev)
		m.Write(info)
		m.Write([]byte{i})
		prev = m.Sum(nil)
		out = append(out, prev...)
	}
	return out[:length]
}

// channelKey is one connection's X25519 key pair.
type channelKey struct {
	secret [32]byte
	public string // base64url without padding: the upgrade's X-Nonce
}

func newChannelKey() (*channelKey, error) {
	k := &channelKey{}
	if _, err := rand.Read(k.secret[:]); err != nil {
		return nil, err
	}
	pub := x25519(k.secret[:], x25519Base)
	k.public = base64.RawURLEncoding.EncodeToString(pub[:])
	return k, nil
}

// channelKeys derives (s2c, c2s): HKDF-SHA256(X25519 secret, salt = sha256(transcript), info "kwc1 keys", 64).
func channelKeys(secret []byte, serverKey, transcript string) (s2c, c2s []byte, err error) {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(serverKey, "="))
	if err != nil || len(raw) != 32 {
		return nil, nil, fmt.Errorf("server_key is not 32 bytes")
	}
	shared := x25519(secret, raw)
	var zero byte
	for _, b := range shared {
		zero |= b
	}
	if zero == 0 {
		return nil, nil, fmt.Errorf("server_key of low order")
	}
	salt := sha256.Sum256([]byte(transcript))
	okm := hkdfSHA256(shared[:], salt[:], []byte("kwc1 keys"), 64)
	return okm[:32], okm[32:], nil
}

// SealFrame is HMAC-SHA256(key, payload) || payload.
func SealFrame(key, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(payload)
	return append(m.Sum(nil), payload...)
}

// OpenFrame returns the payload when the MAC verifies (constant time), else nil.
func OpenFrame(key, frame []byte) []byte {
	if len(frame) <= 32 {
		return nil
	}
	m := hmac.New(sha256.New, key)
	m.Write(frame[32:])
	if !hmac.Equal(m.Sum(nil), frame[:32]) {
		return nil
	}
	return frame[32:]
}

// jsonInt reads a JSON number that is an integer.
func jsonInt(v any) (int64, bool) {
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// verifyChannelHello verifies the hello as the client whose session and key made the upgrade and
// returns (s2c, c2s). Checks in order: malformed, unknown_kid, bad_base64, stale, bad_signature.
func verifyChannelHello(keys pinnedKeys, now float64, session, clientKey string, secret []byte, raw []byte) ([]byte, []byte, *Error) {
	var h map[string]any
	if err := json.Unmarshal(raw, &h); err != nil || h == nil {
		return nil, nil, verificationError(ReasonMalformed, "channel hello is not JSON")
	}
	kid, ok1 := h["kid"].(string)
	sig, ok2 := h["sig"].(string)
	serverKey, ok3 := h["server_key"].(string)
	conn, ok4 := h["conn"].(string)
	ts, ok5 := jsonInt(h["ts"])
	interval, ok6 := jsonInt(h["beat_interval"])
	if h["type"] != "hello" || !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return nil, nil, verificationError(ReasonMalformed, "channel hello lacks fields")
	}
	key, ok := keys[kid]
	if !ok {
		return nil, nil, verificationError(ReasonUnknownKid, fmt.Sprintf("channel hello signed by unpinned key %q", kid))
	}
	sigBytes := decodeSignature(sig)
	if sigBytes == nil {
		return nil, nil, verificationError(ReasonBadBase64, "channel hello signature is not base64 of 64 bytes")
	}
	if d := float64(ts) - now; d > windowSeconds || d < -windowSeconds {
		return nil, nil, verificationError(ReasonStale, fmt.Sprintf("channel hello timestamp %d is off", ts))
	}
	transcript := ChannelTranscript(kid, ts, session, clientKey, serverKey, conn, interval)
	if !ed25519.Verify(key, []byte(transcript), sigBytes) {
		return nil, nil, verificationError(ReasonBadSignature, "channel hello does not verify")
	}
	s2c, c2s, err := channelKeys(secret, serverKey, transcript)
	if err != nil {
		return nil, nil, verificationError(ReasonMalformed, "channel hello carries an unusable server key")
	}
	return s2c, c2s, nil
}

// readChannelFrame judges one server frame: the message, or a verification error (bad_mac, malformed, out_of_order).
func readChannelFrame(s2c []byte, expectedSeq int64, frame []byte, binary bool) (map[string]any, *Error) {
	if !binary {
		return nil, verificationError(ReasonMalformed, "text frame after the hello")
	}
	payload := OpenFrame(s2c, frame)
	if payload == nil {
		return nil, verificationError(ReasonBadMAC, "channel frame MAC does not verify")
	}
	var m map[string]any
	if err := json.Unmarshal(payload, &m); err != nil || m == nil {
		return nil, verificationError(ReasonMalformed, "channel frame is not a JSON object")
	}
	seq, ok := jsonInt(m["seq"])
	if !ok || seq != expectedSeq {
		return nil, verificationError(ReasonOutOfOrder, fmt.Sprintf("channel frame %v where %d was due", m["seq"], expectedSeq))
	}
	return m, nil
}
