package keywarden

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// Every file of sdk/vectors (KW_VECTORS_DIR, else ../vectors in the repository). The dashboard's zip
// carries the SDK without them: then these tests skip, unless KW_REQUIRE_VECTORS=1.
func loadVectors(t *testing.T, name string, into any) {
	t.Helper()
	dirs := []string{}
	if d := os.Getenv("KW_VECTORS_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	dirs = append(dirs, filepath.Join("..", "vectors"))
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, name))
		if err != nil {
			continue
		}
		if err := json.Unmarshal(data, into); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return
	}
	if os.Getenv("KW_REQUIRE_VECTORS") == "1" {
		t.Fatalf("sdk/vectors/%s not found (KW_REQUIRE_VECTORS=1)", name)
	}
	t.Skipf("sdk/vectors not found (set KW_VECTORS_DIR)")
}

func mustPin(t *testing.T, keys []ResponseKey) pinnedKeys {
	t.Helper()
	p, err := pinKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVectorsRequestSignatures(t *testing.T) {
	var v struct {
		Cases []struct{ Method, Path, Timestamp, Nonce, Body, APISecret, Canonical, Signature string } `json:"cases"`
	}
	loadVectors(t, "request-signatures.json", &v)
	var raw struct {
		Cases []map[string]string `json:"cases"`
	}
	loadVectors(t, "request-signatures.json", &raw)
	if len(raw.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range raw.Cases {
		canonical := CanonicalRequest(c["method"], c["path"], c["timestamp"], c["nonce"], []byte(c["body"]))
		if canonical != c["canonical"] {
			t.Errorf("canonical of %s: %q", c["path"], canonical)
		}
		if sig := RequestSignature(c["api_secret"], canonical); sig != c["signature"] {
			t.Errorf("signature of %s: %s", c["path"], sig)
		}
	}
}

type respCase struct {
	Name               string  `json:"name"`
	Kid                string  `json:"kid"`
	Method             string  `json:"method"`
	Path               string  `json:"path"`
	Status             int     `json:"status"`
	Timestamp          string  `json:"timestamp"`
	Nonce              string  `json:"nonce"`
	Body               string  `json:"body"`
	Now                float64 `json:"now"`
	Message            string  `json:"message"`
	Signature          string  `json:"signature"`
	Valid              bool    `json:"valid"`
	VerificationReason string  `json:"verification_reason"`
}

func TestVectorsResponseSignatures(t *testing.T) {
	var v struct {
		MaxSkew    float64       `json:"max_skew_seconds"`
		PinnedKeys []ResponseKey `json:"pinned_keys"`
		Cases      []respCase    `json:"cases"`
	}
	loadVectors(t, "response-signatures.json", &v)
	keys := mustPin(t, v.PinnedKeys)
	if len(v.Cases) < 10 || v.MaxSkew != 300 {
		t.Fatalf("%d cases, skew %v", len(v.Cases), v.MaxSkew)
	}
	for _, c := range v.Cases {
		if c.Message != "" {
			if m := ResponseMessage(c.Kid, c.Method, c.Path, c.Status, c.Timestamp, c.Nonce, []byte(c.Body)); m != c.Message {
				t.Errorf("%s: message %q", c.Name, m)
			}
		}
		_, err := verifyResponse(keys, signedAnswer{method: c.Method, path: c.Path, status: c.Status, kid: c.Kid, ts: c.Timestamp,
			sig: c.Signature, body: []byte(c.Body), nonce: c.Nonce}, c.Now, v.MaxSkew)
		if c.Valid && err != nil {
			t.Errorf("%s: refused: %v", c.Name, err)
		}
		if !c.Valid && (err == nil || err.Code != CodeVerification || err.Reason != c.VerificationReason) {
			t.Errorf("%s: want %s, got %v", c.Name, c.VerificationReason, err)
		}
	}
}

func TestVectorsProofs(t *testing.T) {
	var v struct {
		Start []struct {
			Session  string `json:"session"`
			SystemID string `json:"system_id"`
			Token    string `json:"token"`
			Proof    string `json:"proof"`
		} `json:"start"`
		Beat []struct {
			Previous string `json:"previous_token"`
			Session  string `json:"session"`
			Index    int64  `json:"beat_index"`
			NewToken string `json:"new_token"`
			Count    int64  `json:"beat_count"`
			Proof    string `json:"proof"`
		} `json:"beat"`
	}
	loadVectors(t, "proofs.json", &v)
	if len(v.Start) == 0 || len(v.Beat) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range v.Start {
		if !proofEquals(c.Proof, StartProof(c.Session, c.SystemID, c.Token)) {
			t.Errorf("start proof of %s", c.SystemID)
		}
	}
	for _, c := range v.Beat {
		if !proofEquals(c.Proof, BeatProof(c.Previous, c.Session, c.Index, c.NewToken, c.Count)) {
			t.Errorf("beat proof of index %d", c.Index)
		}
	}
}

func TestVectorsEncryption(t *testing.T) {
	var v struct {
		Cases []map[string]string `json:"cases"`
	}
	loadVectors(t, "encryption.json", &v)
	if len(v.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range v.Cases {
		plain, err := DecryptResponse(c["ciphertext"], c["enc_key"], c["api_secret"], c["init_iv"])
		if err != nil || string(plain) != c["plaintext"] {
			t.Errorf("%s: %v %q", c["init_iv"], err, plain)
		}
		if _, err := DecryptResponse(c["ciphertext"], c["enc_key"]+"x", c["api_secret"], c["init_iv"]); err == nil {
			// a wrong key almost always breaks the padding; a match would still not be the plaintext
			if p, _ := DecryptResponse(c["ciphertext"], c["enc_key"]+"x", c["api_secret"], c["init_iv"]); string(p) == c["plaintext"] {
				t.Errorf("a wrong key decrypted %s", c["init_iv"])
			}
		}
	}
}

func TestVectorsErrors(t *testing.T) {
	var v struct {
		Codes           []string          `json:"codes"`
		Fallback        string            `json:"fallback"`
		StatusFallbacks map[string]string `json:"status_fallbacks"`
		Entries         []struct {
			Status  int    `json:"status"`
			Detail  string `json:"detail"`
			SDKCode string `json:"sdk_code"`
		} `json:"entries"`
		Extra []struct {
			Status  int    `json:"status"`
			Detail  any    `json:"detail"`
			SDKCode string `json:"sdk_code"`
		} `json:"extra_cases"`
	}
	loadVectors(t, "errors.json", &v)
	codes := []string{}
	for _, c := range AllCodes {
		codes = append(codes, string(c))
	}
	if !reflect.DeepEqual(codes, v.Codes) {
		t.Errorf("codes differ: %v", codes)
	}
	if string(fallbackCode) != v.Fallback {
		t.Errorf("fallback %s", fallbackCode)
	}
	fallbacks := map[string]string{}
	for s, c := range statusFallbacks {
		fallbacks[strconv.Itoa(s)] = string(c)
	}
	if !reflect.DeepEqual(fallbacks, v.StatusFallbacks) {
		t.Errorf("status fallbacks differ: %v", fallbacks)
	}
	if len(errorEntries) != len(v.Entries) {
		t.Errorf("%d entries here, %d in errors.json", len(errorEntries), len(v.Entries))
	}
	for i, e := range v.Entries {
		if i < len(errorEntries) && (errorEntries[i].status != e.Status || errorEntries[i].detail != e.Detail || string(errorEntries[i].code) != e.SDKCode) {
			t.Errorf("entry %d differs: %+v", i, e)
		}
		if got := CodeFor(e.Status, e.Detail); string(got) != e.SDKCode {
			t.Errorf("%d %q -> %s, want %s", e.Status, e.Detail, got, e.SDKCode)
		}
	}
	for _, e := range v.Extra {
		if got := CodeFor(e.Status, e.Detail); string(got) != e.SDKCode {
			t.Errorf("extra %d %v -> %s, want %s", e.Status, e.Detail, got, e.SDKCode)
		}
	}
	u := errorFromAnswer(426, map[string]any{"message": "Please update", "latest_version": "2.0", "update_url": "https://example.com/dl"}, "")
	if u.Code != CodeUpdateRequired || u.LatestVersion != "2.0" || u.UpdateURL != "https://example.com/dl" {
		t.Errorf("426: %+v", u)
	}
	if r := errorFromAnswer(429, "Rate limit exceeded", "7"); r.Code != CodeRateLimited || r.RetryAfter != 7 {
		t.Errorf("429: %+v", r)
	}
}

func TestVectorsOffline(t *testing.T) {
	var v struct {
		PinnedKeys []ResponseKey `json:"pinned_keys"`
		Reasons    []string      `json:"reasons"`
		Cases      []struct {
			Name     string         `json:"name"`
			File     string         `json:"file"`
			Now      float64        `json:"now"`
			LastSeen *float64       `json:"last_seen"`
			AppID    string         `json:"app_id"`
			HWID     string         `json:"hwid"`
			Valid    bool           `json:"valid"`
			Reason   string         `json:"reason"`
			Payload  map[string]any `json:"payload"`
		} `json:"cases"`
		Grace struct {
			Cases []struct {
				Name   string         `json:"name"`
				Raw    map[string]any `json:"-"`
				Now    float64        `json:"now"`
				Until  *float64       `json:"until"`
				Active bool           `json:"active"`
			} `json:"cases"`
		} `json:"grace"`
	}
	loadVectors(t, "offline.json", &v)
	want := []string{OfflineMalformed, OfflineUnknownKid, OfflineBadSignature, OfflineWrongApp, OfflineWrongHWID,
		OfflineClockRolledBack, OfflineIssuedInFuture, OfflineExpired}
	if !reflect.DeepEqual(v.Reasons, want) {
		t.Errorf("reasons: %v", v.Reasons)
	}
	keys := mustPin(t, v.PinnedKeys)
	if len(v.Cases) < 20 {
		t.Fatalf("%d cases", len(v.Cases))
	}
	for _, c := range v.Cases {
		lic, err := verifyLicenseFile(c.File, keys, c.AppID, c.HWID, c.Now, c.LastSeen)
		if !c.Valid {
			if err == nil || err.Code != CodeOfflineInvalid || err.Reason != c.Reason {
				t.Errorf("%s: want %s, got %v", c.Name, c.Reason, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: refused: %v", c.Name, err)
			continue
		}
		p := c.Payload
		level, _ := jsonInt(p["level"])
		if lic.AppID != p["app_id"] || lic.LicenseID != p["license_id"] || lic.HWID != p["hwid"] || lic.Kid != p["kid"] || lic.Level != level {
			t.Errorf("%s: %+v", c.Name, lic)
		}
		ents, _ := entitlementsOf(p)
		if !reflect.DeepEqual(lic.Entitlements, ents) {
			t.Errorf("%s: entitlements %v", c.Name, lic.Entitlements)
		}
		if u, _ := p["user"].(string); u != lic.User {
			t.Errorf("%s: user %q", c.Name, lic.User)
		}
		for name, got := range map[string]*time.Time{"issued_at": &lic.IssuedAt, "valid_until": &lic.ValidUntil, "expires_at": lic.ExpiresAt} {
			ms, ok := parseUTCms(p[name])
			if ok != (got != nil) || (ok && got.UnixMilli() != ms) {
				t.Errorf("%s: %s %v", c.Name, name, got)
			}
		}
	}
	// grace: the raw grace_until (absent, null, a number or a string) is read from the JSON itself.
	var raw struct {
		Grace struct {
			Cases []map[string]any `json:"cases"`
		} `json:"grace"`
	}
	loadVectors(t, "offline.json", &raw)
	if len(raw.Grace.Cases) < 5 {
		t.Fatal("no grace cases")
	}
	for i, c := range raw.Grace.Cases {
		want := v.Grace.Cases[i]
		var g grace
		g.note(c)
		now := time.UnixMilli(int64(want.Now * 1000))
		if want.Until == nil {
			if g.untilMs() != 0 {
				t.Errorf("%s: grants %d", want.Name, g.untilMs())
			}
		} else if float64(g.untilMs()) != *want.Until*1000 && int64(*want.Until*1000+0.5) != g.untilMs() {
			t.Errorf("%s: until %d, want %v", want.Name, g.untilMs(), *want.Until)
		}
		if g.activeAt(now) != want.Active {
			t.Errorf("%s: active %v", want.Name, !want.Active)
		}
	}
}

func TestVectorsChannel(t *testing.T) {
	var v struct {
		Now        float64       `json:"now"`
		PinnedKeys []ResponseKey `json:"pinned_keys"`
		Handshake  struct {
			Session         string `json:"session"`
			ClientSecretHex string `json:"client_secret_hex"`
			ClientKey       string `json:"client_key"`
			ServerSecretHex string `json:"server_secret_hex"`
			ServerKey       string `json:"server_key"`
			Conn            string `json:"conn"`
			Kid             string `json:"kid"`
			Ts              int64  `json:"ts"`
			BeatInterval    int64  `json:"beat_interval"`
			Transcript      string `json:"transcript"`
			Hello           string `json:"hello"`
			SharedHex       string `json:"shared_hex"`
			TranscriptSHA   string `json:"transcript_sha256_hex"`
			S2CHex          string `json:"s2c_hex"`
			C2SHex          string `json:"c2s_hex"`
		} `json:"handshake"`
		HelloCases []struct {
			Name      string `json:"name"`
			Hello     string `json:"hello"`
			Session   string `json:"session"`
			ClientKey string `json:"client_key"`
			Valid     bool   `json:"valid"`
			Reason    string `json:"reason"`
		} `json:"hello_cases"`
		ServerFrames []struct {
			Name        string `json:"name"`
			ExpectedSeq int64  `json:"expected_seq"`
			Frame       string `json:"frame"`
			Payload     string `json:"payload"`
			Valid       bool   `json:"valid"`
			Reason      string `json:"reason"`
		} `json:"server_frames"`
		ClientFrames []struct {
			Payload string `json:"payload"`
			Frame   string `json:"frame"`
		} `json:"client_frames"`
	}
	loadVectors(t, "channel.json", &v)
	hs := v.Handshake
	secret, _ := hex.DecodeString(hs.ClientSecretHex)
	pub := x25519(secret, x25519Base)
	if base64.RawURLEncoding.EncodeToString(pub[:]) != hs.ClientKey {
		t.Fatalf("client key %x", pub)
	}
	serverSecret, _ := hex.DecodeString(hs.ServerSecretHex)
	spub := x25519(serverSecret, x25519Base)
	if base64.RawURLEncoding.EncodeToString(spub[:]) != hs.ServerKey {
		t.Fatalf("server key %x", spub)
	}
	if tr := ChannelTranscript(hs.Kid, hs.Ts, hs.Session, hs.ClientKey, hs.ServerKey, hs.Conn, hs.BeatInterval); tr != hs.Transcript {
		t.Fatalf("transcript %q", tr)
	}
	shared := x25519(secret, spub[:])
	if hex.EncodeToString(shared[:]) != hs.SharedHex {
		t.Fatalf("shared %x", shared)
	}
	if sha256Hex([]byte(hs.Transcript)) != hs.TranscriptSHA {
		t.Fatal("transcript sha256")
	}
	s2c, c2s, err := channelKeys(secret, hs.ServerKey, hs.Transcript)
	if err != nil || hex.EncodeToString(s2c) != hs.S2CHex || hex.EncodeToString(c2s) != hs.C2SHex {
		t.Fatalf("keys %x %x %v", s2c, c2s, err)
	}
	keys := mustPin(t, v.PinnedKeys)
	gs2c, gc2s, herr := verifyChannelHello(keys, v.Now, hs.Session, hs.ClientKey, secret, []byte(hs.Hello))
	if herr != nil || !reflect.DeepEqual(gs2c, s2c) || !reflect.DeepEqual(gc2s, c2s) {
		t.Fatalf("handshake hello: %v", herr)
	}
	if len(v.HelloCases) < 5 {
		t.Fatal("no hello cases")
	}
	for _, c := range v.HelloCases {
		_, _, err := verifyChannelHello(keys, v.Now, c.Session, c.ClientKey, secret, []byte(c.Hello))
		if c.Valid && err != nil {
			t.Errorf("%s: refused: %v", c.Name, err)
		}
		if !c.Valid && (err == nil || err.Reason != c.Reason) {
			t.Errorf("%s: want %s, got %v", c.Name, c.Reason, err)
		}
	}
	if len(v.ServerFrames) < 5 {
		t.Fatal("no server frames")
	}
	for _, c := range v.ServerFrames {
		frame, _ := base64.StdEncoding.DecodeString(c.Frame)
		m, err := readChannelFrame(s2c, c.ExpectedSeq, frame, true)
		if c.Valid {
			var want map[string]any
			_ = json.Unmarshal([]byte(c.Payload), &want)
			if err != nil || !reflect.DeepEqual(m, want) {
				t.Errorf("%s: %v %v", c.Name, err, m)
			}
		} else if err == nil || err.Reason != c.Reason {
			t.Errorf("%s: want %s, got %v", c.Name, c.Reason, err)
		}
	}
	if _, err := readChannelFrame(s2c, 1, []byte("text"), false); err == nil || err.Reason != ReasonMalformed {
		t.Errorf("a text frame after the hello: %v", err)
	}
	for _, c := range v.ClientFrames {
		if got := base64.StdEncoding.EncodeToString(SealFrame(c2s, []byte(c.Payload))); got != c.Frame {
			t.Errorf("client frame %s: %s", c.Payload, got)
		}
	}
	_ = ed25519.PublicKeySize
}
