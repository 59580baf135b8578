package keywarden

// Unit tests against an in-process fake of the service that signs every answer with its own key, so
// that timing and hostile answers can be produced exactly.

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type fake struct {
	t      *testing.T
	srv    *httptest.Server
	priv   ed25519.PrivateKey
	mu     sync.Mutex
	token  string
	count  int64
	beats  int
	answer map[string]func(body map[string]any) (int, any) // path -> override
	grace  string                                          // grace_until of activation answers
	down   bool                                            // every beat answered 502 by a "gateway" (unsigned)
}

func newFake(t *testing.T) *fake {
	seed := make([]byte, 32)
	copy(seed, "keywarden go sdk fake service!!")
	f := &fake{t: t, priv: ed25519.NewKeyFromSeed(seed), answer: map[string]func(map[string]any) (int, any){}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) client(t *testing.T, opts ...Option) *Client {
	pub := base64.StdEncoding.EncodeToString(f.priv.Public().(ed25519.PublicKey))
	cfg, err := ParseConfig([]byte(`{"format":1,"base_url":"` + f.srv.URL + `","api_key":"fake-key","version":"1.0",
		"app_id":"fake-app","response_keys":[{"kid":"k1","alg":"Ed25519","public_key":"` + pub + `"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg, append([]Option{WithStateFile(filepath.Join(t.TempDir(), "state.json"))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	path := r.URL.Path
	f.mu.Lock()
	status, answer := 200, any(nil)
	if o, ok := f.answer[path]; ok {
		status, answer = o(body)
	} else {
		switch path {
		case "/api/client/init":
			answer = map[string]any{"success": true, "session": strings.Repeat("s", 43), "app": map[string]any{"name": "Fake", "version": "1.0", "hwid_lock": true}}
		case "/api/client/license":
			a := map[string]any{"success": true, "message": "ok", "level": 2, "expires_at": "2099-01-01T00:00:00.000Z", "entitlements": []any{"pro", "export"}}
			if f.grace != "" {
				a["grace_until"] = f.grace
			}
			answer = a
		case "/api/client/heartbeat/start":
			f.token, f.count = "TT"+strings.Repeat("0", 32), 0
			sys, _ := body["system_id"].(string)
			answer = map[string]any{"success": true, "token": f.token, "beat_interval": 5, "proof": StartProof(body["session"].(string), sys, f.token), "grace_until": f.grace}
		case "/api/client/heartbeat":
			f.beats++
			if f.down {
				f.mu.Unlock()
				w.WriteHeader(502)
				return
			}
			idx, _ := jsonInt(body["beat_index"])
			prev := f.token
			f.count++
			f.token = "TT" + strings.Repeat(strconv.FormatInt(f.count%10, 10), 32)
			answer = map[string]any{"success": true, "new_token": f.token, "beat_count": f.count,
				"proof": BeatProof(prev, body["session"].(string), idx, f.token, f.count)}
		case "/api/client/heartbeat/stop":
			answer = map[string]any{"success": true}
		default:
			status, answer = 404, map[string]any{"detail": "Not found"}
		}
	}
	f.mu.Unlock()
	out, ok := answer.([]byte)
	if !ok {
		out, _ = json.Marshal(answer)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	msg := ResponseMessage("k1", r.Method, path, status, ts, r.Header.Get("X-Nonce"), out)
	w.Header().Set("X-Response-Kid", "k1")
	w.Header().Set("X-Response-Timestamp", ts)
	w.Header().Set("X-Response-Signature", base64.StdEncoding.EncodeToString(ed25519.Sign(f.priv, []byte(msg))))
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

func iso(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// docs/protocol.md 12.6: the offline state is left the moment the grace period ends, not at the next failed beat.
func TestGraceEndsOnTimeNotAtTheNextBeat(t *testing.T) {
	f := newFake(t)
	c := f.client(t)
	must(c.Init(ctx))
	// grace_until by the server's clock as this client knows it (the offset is learned to the second)
	graceUntil := c.ServerNow().Add(2500 * time.Millisecond)
	f.grace = iso(graceUntil)
	must(c.ActivateLicense(ctx, "KEY", "hwid-1"))
	f.mu.Lock()
	f.down = true
	f.mu.Unlock()
	hb, ev := start(t, c, HeartbeatOptions{SystemID: "sys", Interval: 2 * time.Second, ChannelOff: true})
	ev.wait(t, EventOffline, 1, 5*time.Second)
	if hb.State() != StateOffline || !c.GraceActive() {
		t.Fatalf("%s", hb.State())
	}
	x := ev.wait(t, EventGraceExpired, 1, 5*time.Second)[0]
	late := c.ServerNow().Sub(graceUntil)
	f.mu.Lock()
	beats := f.beats
	f.mu.Unlock()
	// The one failed beat (at 2 s) made it offline; grace_expired comes when grace_until passes, before
	// the next beat (at 4 s) fails.
	if beats != 1 || late < -10*time.Millisecond || late > 300*time.Millisecond {
		t.Fatalf("grace_expired %v after grace_until, after %d beats", late, beats)
	}
	if hb.State() != StateDegraded || c.GraceActive() || x.GraceUntil.UnixMilli() != graceUntil.UnixMilli() || x.Err.Status != 502 {
		t.Fatalf("%s %+v", hb.State(), x)
	}
	if len(ev.of(EventGraceExpired)) != 1 {
		t.Fatal(ev.summary())
	}
}

// Hostile or broken answers, every one signed: a typed error, never a panic.
func TestHostileAnswersAreTypedErrors(t *testing.T) {
	f := newFake(t)
	for name, tc := range map[string]struct {
		status int
		body   any
		want   ErrorCode
		reason string
	}{
		"not JSON":                {200, []byte("<html>"), CodeVerification, ReasonMalformed},
		"an array":                {200, []byte("[1,2]"), CodeVerification, ReasonMalformed},
		"no success":              {200, map[string]any{"session": "x"}, CodeVerification, ReasonMalformed},
		"no session":              {200, map[string]any{"success": true, "app": map[string]any{"name": "x"}}, CodeVerification, ReasonMalformed},
		"app not an object":       {200, map[string]any{"success": true, "session": "s", "app": "x"}, CodeVerification, ReasonMalformed},
		"deep nesting":            {200, []byte(strings.Repeat("[", 100000)), CodeVerification, ReasonMalformed},
		"426 object":              {426, map[string]any{"detail": map[string]any{"message": "Update", "latest_version": 3}}, CodeUpdateRequired, ""},
		"422 list":                {422, map[string]any{"detail": []any{map[string]any{"loc": []any{"body"}}}}, CodeServer, ""},
		"disabled message":        {403, map[string]any{"detail": "Down for maintenance"}, CodeAppDisabled, ""},
		"an error without detail": {400, map[string]any{}, CodeServer, ""},
	} {
		tc := tc
		f.mu.Lock()
		f.answer["/api/client/init"] = func(map[string]any) (int, any) { return tc.status, tc.body }
		f.mu.Unlock()
		_, err := f.client(t, WithRetries(0)).Init(ctx)
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.want || e.Reason != tc.reason {
			t.Errorf("%s: %v", name, err)
		}
	}
	f.mu.Lock()
	f.answer["/api/client/init"] = func(map[string]any) (int, any) { return 403, map[string]any{"detail": "License key is banned"} }
	f.mu.Unlock()
	_, err := f.client(t).Init(ctx)
	if !errors.Is(err, &Error{Code: CodeBanned}) || errors.Is(err, &Error{Code: CodeExpired}) {
		t.Errorf("errors.Is by code: %v", err)
	}
	// A license answer whose entitlements are not a list of codes, or without a level.
	c := f.client(t)
	delete(f.answer, "/api/client/init")
	must(c.Init(ctx))
	for _, body := range []map[string]any{{"success": true, "level": 1, "entitlements": "pro"}, {"success": true}} {
		body := body
		f.mu.Lock()
		f.answer["/api/client/license"] = func(map[string]any) (int, any) { return 200, body }
		f.mu.Unlock()
		_, err := c.ActivateLicense(ctx, "K", "h")
		var e *Error
		if !errors.As(err, &e) || e.Reason != ReasonMalformed {
			t.Errorf("%v: %v", body, err)
		}
	}
}

func TestUnreachableServiceIsANetworkErrorNotSent(t *testing.T) {
	f := newFake(t)
	c := f.client(t, WithRetries(1), WithTimeout(2*time.Second))
	f.srv.Close()
	_, err := c.Init(ctx)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeNetwork || !e.NotSent {
		t.Fatalf("%v", err)
	}
	_, err = c.ActivateLicense(ctx, "K", "")
	if !errors.As(err, &e) || e.Code != CodeSessionExpired {
		t.Fatalf("without init: %v", err)
	}
}

func TestConfigRefusals(t *testing.T) {
	good := `"base_url":"http://h","api_key":"k","response_keys":[{"kid":"k1","public_key":"` + base64.StdEncoding.EncodeToString(make([]byte, 32)) + `"}]`
	for name, text := range map[string]string{
		"not JSON":        `nope`,
		"format 2":        `{"format":2,` + good + `}`,
		"format 1.0":      `{"format":1.0,` + good + `}`,
		"no base_url":     `{"format":1,"api_key":"k","response_keys":[]}`,
		"ftp base_url":    `{"format":1,` + strings.Replace(good, "http://h", "ftp://h", 1) + `}`,
		"no keys":         `{"format":1,"base_url":"http://h","api_key":"k","response_keys":[]}`,
		"short key":       `{"format":1,"base_url":"http://h","api_key":"k","response_keys":[{"kid":"k1","public_key":"AAAA"}]}`,
		"other alg":       `{"format":1,"base_url":"http://h","api_key":"k","response_keys":[{"kid":"k1","alg":"RSA","public_key":"AAAA"}]}`,
		"empty app_id":    `{"format":1,"app_id":"",` + good + `}`,
		"numeric version": `{"format":1,"version":1,` + good + `}`,
	} {
		_, err := ParseConfig([]byte(text))
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: %v", name, err)
		}
	}
	c, err := ParseConfig([]byte("\xef\xbb\xbf{\"format\":1,\"future\":true,\"api_secret\":\"s3cret\"," + good + "}"))
	if err != nil || c.APISecret != "s3cret" || strings.Contains(c.String(), "s3cret") {
		t.Fatalf("%v %v", c, err)
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("a missing file")
	}
	if _, err := New(c, WithEncKey("x"), WithTimeout(-1)); err == nil {
		t.Fatal("a negative timeout")
	}
	cfg := *c
	cfg.APISecret = ""
	if _, err := New(&cfg, WithEncKey("x")); err == nil {
		t.Fatal("enc key without a secret")
	}
	// LoadOffline needs the app_id.
	noID := must(New(c))
	var ce *ConfigError
	if _, err := noID.LoadOffline("kwlic1.a.b", "h"); !errors.As(err, &ce) {
		t.Fatalf("%v", err)
	}
}

func TestClockRecordKeepsTheLatestTime(t *testing.T) {
	dir := t.TempDir()
	r := &clockRecord{path: filepath.Join(dir, "sub", "state.json"), log: discard{}}
	if r.lastSeen() != nil {
		t.Fatal("a record from nowhere")
	}
	r.record(1000)
	r.record(500) // never lowered
	if s := r.lastSeen(); s == nil || *s != 1000 {
		t.Fatalf("%v", s)
	}
	if err := os.WriteFile(r.path, []byte("{damaged"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r.lastSeen() != nil {
		t.Fatal("a damaged file is no record")
	}
}

func TestMachineHWIDFormula(t *testing.T) {
	// sha256("kwhwid1\n" + salt + "\n" + lower(trim(id))), the same in every SDK.
	if HWIDFor("salt", "  ABC-def \n") != HWIDFor("salt", "abc-def") || len(HWIDFor("a", "b")) != 64 || HWIDFor("a", "b") == HWIDFor("c", "b") {
		t.Fatal("formula")
	}
	if h := sha256Hex([]byte("kwhwid1\nsalt\nabc-def")); h != HWIDFor("salt", "abc-def") {
		t.Fatal(h)
	}
}

func TestPlatformMachineIDParsers(t *testing.T) {
	ioreg := `+-o J316sAP  <class IOPlatformExpertDevice>
    "IOPlatformUUID" = "A1B2C3D4-0000-1111-2222-333344445555"`
	if m := ioregUUID.FindStringSubmatch(ioreg); m == nil || m[1] != "A1B2C3D4-0000-1111-2222-333344445555" {
		t.Fatalf("ioreg: %v", m)
	}
	reg := "\r\nHKEY_LOCAL_MACHINE\\SOFTWARE\\Microsoft\\Cryptography\r\n    MachineGuid    REG_SZ    6f1c2a9e-4b7d-4c1a-9e55-0a1b2c3d4e5f\r\n"
	if m := machineGUID.FindStringSubmatch(reg); m == nil || m[1] != "6f1c2a9e-4b7d-4c1a-9e55-0a1b2c3d4e5f" {
		t.Fatalf("reg: %v", m)
	}
	if runtime.GOOS == "linux" {
		if b, err := os.ReadFile("/etc/machine-id"); err == nil && strings.TrimSpace(string(b)) != "" {
			if RawMachineID() != strings.TrimSpace(string(b)) || MachineHWID("s") != HWIDFor("s", string(b)) {
				t.Fatal("the Linux machine id")
			}
		}
	}
}
