package keywarden

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// docs/protocol.md 3-6. Each function matches one file of sdk/vectors (vectors_test.go checks them).

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// CanonicalRequest is docs/protocol.md 3: METHOD \n PATH \n X-Timestamp \n X-Nonce \n hex(sha256(body)).
func CanonicalRequest(method, path, timestamp, nonce string, body []byte) string {
	return strings.ToUpper(method) + "\n" + path + "\n" + timestamp + "\n" + nonce + "\n" + sha256Hex(body)
}

// RequestSignature is X-Signature: hex(HMAC-SHA256(key = utf8(api_secret), canonical)).
func RequestSignature(apiSecret, canonical string) string {
	m := hmac.New(sha256.New, []byte(apiSecret))
	m.Write([]byte(canonical))
	return hex.EncodeToString(m.Sum(nil))
}

// ResponseMessage is docs/protocol.md 4: kw1 \n KID \n METHOD \n PATH \n STATUS \n TS \n NONCE \n hex(sha256(body)).
func ResponseMessage(kid, method, path string, status int, timestamp, nonce string, body []byte) string {
	return "kw1\n" + kid + "\n" + strings.ToUpper(method) + "\n" + path + "\n" + strconv.Itoa(status) + "\n" +
		timestamp + "\n" + nonce + "\n" + sha256Hex(body)
}

// Strict: base64 of exactly 64 bytes is 86 characters and "==".
var sigPattern = regexp.MustCompile(`^[A-Za-z0-9+/]{86}==$`)

func decodeSignature(v string) []byte {
	if !sigPattern.MatchString(v) {
		return nil
	}
	b, err := base64.StdEncoding.Strict().DecodeString(v)
	if err != nil || len(b) != 64 {
		return nil
	}
	return b
}

func macB64(key []byte, msg string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// StartProof is docs/protocol.md 6 for heartbeat/start.
func StartProof(session, systemID, token string) string {
	return macB64([]byte(session), "kwhs1\n"+systemID+"\n"+token)
}

// BeatProof is docs/protocol.md 6 for a beat (integers in decimal).
func BeatProof(previousToken, session string, beatIndex int64, newToken string, beatCount int64) string {
	return macB64([]byte(previousToken), fmt.Sprintf("kwhb1\n%s\n%d\n%s\n%d", session, beatIndex, newToken, beatCount))
}

// proofEquals compares a received proof with the expected one in constant time.
func proofEquals(given any, expected string) bool {
	s, ok := given.(string)
	return ok && hmac.Equal([]byte(s), []byte(expected))
}

// DecryptResponse is docs/protocol.md 5: AES-256-CBC-PKCS7 with key sha256(enc_key "-" api_secret) and
// iv sha256(init_iv)[:16]; an error for a wrong key or damaged ciphertext.
func DecryptResponse(ciphertextB64, encKey, apiSecret, initIV string) ([]byte, error) {
	key := sha256.Sum256([]byte(encKey + "-" + apiSecret))
	iv := sha256.Sum256([]byte(initIV))
	data, err := base64.StdEncoding.Strict().DecodeString(ciphertextB64)
	if err != nil {
		return nil, fmt.Errorf("ciphertext is not base64: %w", err)
	}
	if len(data) == 0 || len(data)%aes.BlockSize != 0 {
		return nil, errors.New("ciphertext is not a whole number of AES blocks")
	}
	block, _ := aes.NewCipher(key[:])
	out := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, iv[:aes.BlockSize]).CryptBlocks(out, data)
	pad := int(out[len(out)-1])
	if pad < 1 || pad > aes.BlockSize || !bytes.Equal(out[len(out)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return nil, errors.New("bad padding")
	}
	return out[:len(out)-pad], nil
}

// pinnedKeys maps kid -> Ed25519 public key.
type pinnedKeys map[string]ed25519.PublicKey

func pinKeys(keys []ResponseKey) (pinnedKeys, error) {
	out := pinnedKeys{}
	for _, k := range keys {
		b, err := base64.StdEncoding.Strict().DecodeString(k.PublicKey)
		if err != nil || len(b) != ed25519.PublicKeySize {
			return nil, configErr("key %s: public_key must be base64 of 32 bytes", k.Kid)
		}
		out[k.Kid] = ed25519.PublicKey(b)
	}
	return out, nil
}

var tsPattern = regexp.MustCompile(`^[0-9]{1,12}$`)

// signedAnswer is what verifyResponse judges. Header names are canonical (http.Header.Get).
type signedAnswer struct {
	method, path string
	status       int
	kid, ts, sig string
	body         []byte
	nonce        string // the X-Nonce this client sent
}

// verifyResponse checks, in the order of sdk/vectors/response-signatures.json: headers present, kid
// pinned, signature encoding, freshness (|ts - now| <= maxSkew), Ed25519 over this request's nonce.
// Returns the answer's timestamp.
func verifyResponse(keys pinnedKeys, a signedAnswer, now float64, maxSkew float64) (int64, *Error) {
	if a.kid == "" || a.ts == "" || a.sig == "" {
		return 0, verificationError(ReasonUnsigned, fmt.Sprintf("answer %d of %s carries no signature", a.status, a.path))
	}
	key, ok := keys[a.kid]
	if !ok {
		return 0, verificationError(ReasonUnknownKid, fmt.Sprintf("answer of %s is signed by unpinned key %q", a.path, a.kid))
	}
	sig := decodeSignature(a.sig)
	if sig == nil {
		return 0, verificationError(ReasonBadBase64, fmt.Sprintf("signature of %s is not base64 of 64 bytes", a.path))
	}
	if !tsPattern.MatchString(a.ts) {
		return 0, verificationError(ReasonStale, "timestamp is not unix seconds")
	}
	ts, _ := strconv.ParseInt(a.ts, 10, 64)
	if d := float64(ts) - now; d > maxSkew || d < -maxSkew {
		return 0, verificationError(ReasonStale, fmt.Sprintf("timestamp %s is %.0f s off", a.ts, d))
	}
	msg := ResponseMessage(a.kid, a.method, a.path, a.status, a.ts, a.nonce, a.body)
	if !ed25519.Verify(key, []byte(msg), sig) {
		return 0, verificationError(ReasonBadSignature, fmt.Sprintf("signature of %s (%d) does not verify", a.path, a.status))
	}
	return ts, nil
}
