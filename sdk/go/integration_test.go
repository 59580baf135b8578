package keywarden

// Integration tests against a real Keywarden server prepared by test/helpers/sdk-harness.ts (run by
// test/sdk/go.test.ts). They run only when KW_BASE_URL is set; with KW_REQUIRE_INTEGRATION=1 a missing
// server is a failure instead of a skip. Direct calls come from 127.0.0.1 and share its budgets (init
// 30/min; register, login, license 20/min each): the tests through a proxy use the proxy's address.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

const code = "abcdef0123456789"

var (
	keysMu sync.Mutex
	keys   = map[string][]string{}
)

func needServer(t *testing.T) {
	t.Helper()
	if os.Getenv("KW_BASE_URL") == "" {
		if os.Getenv("KW_REQUIRE_INTEGRATION") == "1" {
			t.Fatal("KW_REQUIRE_INTEGRATION=1 but KW_BASE_URL is not set")
		}
		t.Skip("integration tests need a server: set KW_BASE_URL (test/sdk/go.test.ts does)")
	}
}

// key takes a key from the front of KW_KEYS_<label> (the vitest's own runs take them from the end).
func key(t *testing.T, label string) string {
	t.Helper()
	keysMu.Lock()
	defer keysMu.Unlock()
	if _, ok := keys[label]; !ok {
		keys[label] = strings.Split(os.Getenv("KW_KEYS_"+label), ",")
	}
	if len(keys[label]) == 0 || keys[label][0] == "" {
		t.Fatalf("no keys of %s left", label)
	}
	k := keys[label][0]
	keys[label] = keys[label][1:]
	return k
}

func hwid(what string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return "sdk-go-" + what + "-" + hex.EncodeToString(b)
}

func newClient(t *testing.T, label string, opts ...Option) *Client {
	t.Helper()
	c, err := FromConfig(os.Getenv("KW_CONFIG_"+label), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func jsonEnv(t *testing.T, name, field string) string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal([]byte(os.Getenv(name)), &m); err != nil || m[field] == "" {
		t.Fatalf("%s has no %s", name, field)
	}
	return m[field]
}

// must returns v, or panics on err (the test fails with the error and its stack).
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("unexpected failure: %v", err))
	}
	return v
}

// fails asserts err is a *Error with the code and returns it.
func fails(t *testing.T, err error, want ErrorCode) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want a %s *Error, got %v", want, err)
	}
	if e.Code != want {
		t.Fatalf("want %s, got %s: %v", want, e.Code, e)
	}
	return e
}

// events records every event of a heartbeat and lets a test wait for them.
type events struct {
	mu     sync.Mutex
	all    []Event
	notify chan struct{}
}

func record(hb *Heartbeat) *events {
	r := &events{notify: make(chan struct{}, 1)}
	for _, k := range []EventKind{EventBeat, EventDegraded, EventCompromised, EventRecovered, EventKilled, EventStopped,
		EventRevoked, EventUpdateRequired, EventNotice, EventChannel, EventOffline, EventGraceExpired, EventExpired} {
		hb.On(k, func(e Event) {
			r.mu.Lock()
			r.all = append(r.all, e)
			r.mu.Unlock()
			select {
			case r.notify <- struct{}{}:
			default:
			}
		})
	}
	return r
}

func (r *events) of(kind EventKind) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.all {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// wait returns the first n events of kind, failing after timeout.
func (r *events) wait(t *testing.T, kind EventKind, n int, timeout time.Duration) []Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if got := r.of(kind); len(got) >= n {
			return got[:n]
		}
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("waited %s for %d %s event(s); got %d; all: %s", timeout, n, kind, len(r.of(kind)), r.summary())
		}
	}
}

// after waits for n more events of kind than there are now.
func (r *events) after(t *testing.T, kind EventKind, n int, timeout time.Duration, act func()) []Event {
	t.Helper()
	before := len(r.of(kind))
	act()
	got := r.wait(t, kind, before+n, timeout)
	return got[before:]
}

func (r *events) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for _, e := range r.all {
		x := string(e.Kind)
		if e.Err != nil {
			x += "(" + string(e.Err.Code) + ":" + e.Err.Reason + ")"
		}
		if e.State != "" {
			x += "(" + e.State + ")"
		}
		s = append(s, x)
	}
	return strings.Join(s, " ")
}

func start(t *testing.T, c *Client, o HeartbeatOptions) (*Heartbeat, *events) {
	t.Helper()
	if o.DebuggerDetected == nil {
		o.DebuggerDetected = func() bool { return false }
	}
	if o.CodeHash == "" {
		o.CodeHash = code
	}
	hb := must(c.PrepareHeartbeat(context.Background(), o))
	ev := record(hb)
	hb.Start()
	t.Cleanup(hb.Stop)
	return hb, ev
}

// forwardedFor makes the server attribute calls to ip (the harness trusts 127.0.0.1 as a proxy).
type forwardedFor struct {
	ip      string
	rewrite func(*http.Request)
}

func (f forwardedFor) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Forwarded-For", f.ip)
	if f.rewrite != nil {
		f.rewrite(r)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func randomIP() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("10.%d.%d.%d", b[0]%250+1, b[1]%250+1, b[2]%250+1)
}

func post(t *testing.T, url string, body any, header map[string]string) (int, []byte) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(res.Body)
	return res.StatusCode, buf.Bytes()
}

func owner(t *testing.T, method, path string, body any) map[string]any {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, os.Getenv("KW_BASE_URL")+path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+os.Getenv("KW_OWNER_TOKEN"))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out any
	_ = json.NewDecoder(res.Body).Decode(&out)
	if res.StatusCode != 200 {
		t.Fatalf("%s %s: %d %v", method, path, res.StatusCode, out)
	}
	if m, ok := out.(map[string]any); ok {
		return m
	}
	return map[string]any{"items": out}
}

func licenseID(t *testing.T, appID, k string) string {
	t.Helper()
	items, _ := owner(t, "GET", "/api/apps/"+appID+"/licenses?q="+k[len(k)-4:], nil)["items"].([]any)
	for _, it := range items {
		m := it.(map[string]any)
		if m["key_preview"] == k[:4]+"****"+k[len(k)-4:] {
			return m["id"].(string)
		}
	}
	t.Fatalf("no license %s", k)
	return ""
}

var ctx = context.Background()

// --- the client surface --------------------------------------------------------------------------

func TestIntegrationInit(t *testing.T) {
	needServer(t)
	c := newClient(t, "PLAIN")
	app := must(c.Init(ctx))
	if app.Name != "SDK PLAIN" || app.Version != "1.0" || !app.HWIDLock || len(app.Session) != 43 {
		t.Fatalf("%+v", app)
	}
	if off, ok := c.ClockOffset(); !ok || off > 5*time.Second || off < -5*time.Second {
		t.Fatalf("offset %v %v", off, ok)
	}
}

func TestIntegrationRegisterThenLogin(t *testing.T) {
	needServer(t)
	name := hwid("user")
	c := newClient(t, "PLAIN")
	must(c.Init(ctx))
	u := must(c.Register(ctx, name, "go-pass-123", key(t, "PLAIN"), "sdk-go-hwid-aaaaaaaa"))
	if u.Username != name || u.Level != 3 || u.ExpiresAt == nil {
		t.Fatalf("%+v", u)
	}
	_, err := c.Login(ctx, name, "wrong-pass", "sdk-go-hwid-aaaaaaaa")
	if e := fails(t, err, CodeInvalidKey); e.Status != 401 {
		t.Fatalf("%+v", e)
	}
	again := newClient(t, "PLAIN")
	must(again.Init(ctx))
	if u := must(again.Login(ctx, name, "go-pass-123", "sdk-go-hwid-aaaaaaaa")); u.Level != 3 {
		t.Fatalf("%+v", u)
	}
}

func TestIntegrationLicenseWithHWIDLock(t *testing.T) {
	needServer(t)
	k := key(t, "PLAIN")
	c := newClient(t, "PLAIN")
	must(c.Init(ctx))
	lic := must(c.ActivateLicense(ctx, k, "sdk-go-hwid-aaaaaaaa"))
	if lic.Level != 3 || lic.ExpiresAt == nil {
		t.Fatalf("%+v", lic)
	}
	if days := time.Until(*lic.ExpiresAt).Hours() / 24; days < 29 || days > 30.01 {
		t.Fatalf("expires in %v days", days)
	}
	other := newClient(t, "PLAIN")
	must(other.Init(ctx))
	_, err := other.ActivateLicense(ctx, k, "sdk-go-hwid-bbbbbbbb")
	if e := fails(t, err, CodeHWIDMismatch); e.Status != 403 || e.Detail != "HWID mismatch. Key locked to another device." {
		t.Fatalf("%+v", e)
	}
	_, err = other.ActivateLicense(ctx, "NOT-A-KEY-AT-ALL", "sdk-go-hwid-bbbbbbbb")
	fails(t, err, CodeInvalidKey)
}

func TestIntegrationHeartbeatThreeBeatsThenStop(t *testing.T) {
	needServer(t)
	c := newClient(t, "PLAIN")
	must(c.Init(ctx))
	must(c.ActivateLicense(ctx, key(t, "PLAIN"), "sdk-go-hwid-aaaaaaaa"))
	hb, ev := start(t, c, HeartbeatOptions{SystemID: "sdk-go-system-01", Interval: 50 * time.Millisecond, ChannelOff: true})
	if hb.BeatInterval() != 5 {
		t.Fatalf("interval %d", hb.BeatInterval())
	}
	got := ev.wait(t, EventBeat, 3, 10*time.Second)
	for i, b := range got {
		if b.Index != int64(i+1) || b.Count != int64(i+1) {
			t.Fatalf("beat %d: %+v", i, b)
		}
	}
	session, token := hb.Session(), func() string { hb.mu.Lock(); defer hb.mu.Unlock(); return hb.token }()
	hb.Stop()
	<-hb.Done()
	if s := ev.wait(t, EventStopped, 1, time.Second)[0]; s.Reason != "stop" || hb.State() != StateStopped {
		t.Fatalf("%+v %s", s, hb.State())
	}
	// the session is gone on the server: a beat with its last token is refused
	_, err := c.Call(ctx, "heartbeat", map[string]any{"session": session, "token": token, "system_id": "sdk-go-system-01", "beat_index": 99, "code_hash": code})
	fails(t, err, CodeHeartbeatKilled)
}

func TestIntegrationDebuggerReportKillsTheHeartbeat(t *testing.T) {
	needServer(t)
	c := newClient(t, "PLAIN")
	must(c.Init(ctx))
	must(c.ActivateLicense(ctx, key(t, "PLAIN"), "sdk-go-hwid-aaaaaaaa"))
	hb, ev := start(t, c, HeartbeatOptions{SystemID: "sdk-go-system-02", Interval: 50 * time.Millisecond, Reauth: true,
		DebuggerDetected: func() bool { return true }, ChannelOff: true})
	k := ev.wait(t, EventKilled, 1, 10*time.Second)[0]
	if k.Err.Code != CodeHeartbeatKilled || k.Err.Status != 403 || k.Err.Detail != "rejected" {
		t.Fatalf("%+v", k.Err)
	}
	if ev.wait(t, EventStopped, 1, time.Second)[0].Reason != "killed" || hb.Running() || hb.State() != StateKilled {
		t.Fatal("not ended as killed")
	}
}

func TestIntegrationUpdateRequired(t *testing.T) {
	needServer(t)
	_, err := newClient(t, "OUTDATED").Init(ctx)
	e := fails(t, err, CodeUpdateRequired)
	if e.Status != 426 || e.LatestVersion != "2.0" || e.UpdateURL != "https://example.com/download/2.0" || !strings.Contains(e.Error(), "Version 2.0 is out.") {
		t.Fatalf("%+v", e)
	}
}

func TestIntegrationRateLimitedCarriesRetryAfter(t *testing.T) {
	needServer(t)
	_, err := newClient(t, "PLAIN", WithBaseURL(jsonEnv(t, "KW_TAMPER_URLS", "rate_limited"))).Init(ctx)
	if e := fails(t, err, CodeRateLimited); e.Status != 429 || e.RetryAfter <= 0 {
		t.Fatalf("%+v", e)
	}
}

func TestIntegrationSignedAppWithEncryptedAnswers(t *testing.T) {
	needServer(t)
	var bodies []string
	var mu sync.Mutex
	rec := &http.Client{Transport: recorder{func(req *http.Request, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		if req.Header.Get("X-Signature") == "" || req.Header.Get("X-Timestamp") == "" {
			t.Errorf("unsigned request to %s", req.URL.Path)
		}
		bodies = append(bodies, string(body))
	}}}
	c := newClient(t, "SIGNED", WithHTTPClient(rec), WithEncKey("sdk-go-enc"))
	if app := must(c.Init(ctx)); app.Name != "SDK SIGNED" {
		t.Fatal(app.Name)
	}
	if lic := must(c.ActivateLicense(ctx, key(t, "SIGNED"), "sdk-go-hwid-aaaaaaaa")); lic.Level != 3 {
		t.Fatal(lic.Level)
	}
	for _, b := range bodies {
		if !strings.HasPrefix(b, `{"enc":"`) {
			t.Fatalf("not encrypted: %s", b)
		}
	}
	cfg := must(LoadConfig(os.Getenv("KW_CONFIG_SIGNED")))
	cfg.APISecret = ""
	unsigned := must(New(cfg))
	_, err := unsigned.Init(ctx)
	if e := fails(t, err, CodeClockSkew); e.Status != 401 {
		t.Fatalf("%+v", e)
	}
}

type recorder struct{ seen func(*http.Request, []byte) }

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(res.Body)
	res.Body.Close()
	r.seen(req, buf.Bytes())
	res.Body = readCloser{bytes.NewReader(buf.Bytes())}
	return res, nil
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

func TestIntegrationSignedWithAClockEightMinutesOff(t *testing.T) {
	needServer(t)
	c := newClient(t, "SIGNED", WithClock(func() time.Time { return time.Now().Add(-8 * time.Minute) }))
	must(c.Init(ctx))
	if off, _ := c.ClockOffset(); off < 477*time.Second || off > 483*time.Second {
		t.Fatalf("offset %v", off)
	}
	if lic := must(c.ActivateLicense(ctx, key(t, "SIGNED"), "sdk-go-hwid-aaaaaaaa")); lic.Level != 3 {
		t.Fatal(lic.Level)
	}
}

// --- tampered answers ----------------------------------------------------------------------------

func TestIntegrationTamper(t *testing.T) {
	needServer(t)
	for mode, reasons := range map[string][]string{
		"forged": {ReasonBadSignature}, "unsigned": {ReasonUnsigned}, "replayed": {ReasonBadSignature, ReasonStale},
		"foreign_nonce": {ReasonBadSignature}, "unknown_kid": {ReasonUnknownKid}, "stale": {ReasonStale},
		"bad_base64": {ReasonBadBase64},
	} {
		mode, reasons := mode, reasons
		t.Run(mode, func(t *testing.T) {
			c := newClient(t, "PLAIN", WithBaseURL(jsonEnv(t, "KW_TAMPER_URLS", mode)), WithRetries(0))
			_, err := c.Init(ctx)
			e := fails(t, err, CodeVerification)
			if !contains(reasons, e.Reason) || c.Session() != "" {
				t.Fatalf("%s: reason %s, session %q", mode, e.Reason, c.Session())
			}
		})
	}
}

func TestIntegrationTamperBadProofStartTokenNotTrusted(t *testing.T) {
	needServer(t)
	c := newClient(t, "PLAIN", WithBaseURL(jsonEnv(t, "KW_TAMPER_URLS", "bad_proof")))
	must(c.Init(ctx))
	must(c.ActivateLicense(ctx, key(t, "PLAIN"), "sdk-go-hwid-aaaaaaaa"))
	_, err := c.StartHeartbeat(ctx, HeartbeatOptions{SystemID: "sdk-go-system-03", CodeHash: code})
	if e := fails(t, err, CodeVerification); e.Reason != ReasonBadProof {
		t.Fatalf("%+v", e)
	}
}

func TestIntegrationEveryBeatTamperedIsCompromisedAfter5(t *testing.T) {
	needServer(t)
	c := newClient(t, "PLAIN", WithBaseURL(jsonEnv(t, "KW_TAMPER_URLS", "bad_beat_proof")))
	must(c.Init(ctx))
	must(c.ActivateLicense(ctx, key(t, "PLAIN"), "sdk-go-hwid-aaaaaaaa"))
	hb, ev := start(t, c, HeartbeatOptions{SystemID: "sdk-go-compromised", Interval: 50 * time.Millisecond, Reauth: true})
	started := hb.LastBeatAt()
	got := ev.wait(t, EventCompromised, 1, 20*time.Second)[0]
	if got.VerificationFailures != 5 || got.Err.Reason != ReasonBadProof || !got.LastBeatAt.Equal(started) {
		t.Fatalf("%+v", got)
	}
	deg := ev.of(EventDegraded)[:5]
	for i, d := range deg {
		if d.VerificationFailures != i+1 || d.Reauthenticating != (i < 4) || !d.LastBeatAt.Equal(started) {
			t.Fatalf("degraded %d: %+v", i, d)
		}
	}
	// No more re-authentication: the next beat carries the old token and the server refuses it.
	if k := ev.wait(t, EventKilled, 1, 20*time.Second)[0]; k.Err.Code != CodeHeartbeatKilled {
		t.Fatalf("%+v", k.Err)
	}
	if n := len(ev.of(EventRecovered)); n != 4 || hb.State() != StateKilled {
		t.Fatalf("%d re-authentications, state %s", n, hb.State())
	}
}

// --- heartbeat robustness ------------------------------------------------------------------------

func outage(t *testing.T, ms int, ban string) {
	t.Helper()
	body := map[string]any{"ms": ms}
	if ban != "" {
		body["ban"] = ban
	}
	if status, b := post(t, os.Getenv("KW_OUTAGE_URL")+"/__outage", body, nil); status != 200 {
		t.Fatalf("outage: %d %s", status, b)
	}
}

func TestIntegrationAnOutageThenAForgottenSessionReauthenticatesOnce(t *testing.T) {
	needServer(t)
	c := newClient(t, "PLAIN", WithBaseURL(os.Getenv("KW_OUTAGE_URL")))
	must(c.Init(ctx))
	must(c.ActivateLicense(ctx, key(t, "PLAIN"), "sdk-go-hwid-aaaaaaaa"))
	hb, ev := start(t, c, HeartbeatOptions{SystemID: "sdk-go-outage-01", Interval: 200 * time.Millisecond, Reauth: true})
	ev.wait(t, EventBeat, 1, 10*time.Second)
	last := hb.LastBeatAt()
	n := len(ev.of(EventBeat))
	outage(t, 1500, "")
	ev.wait(t, EventRecovered, 1, 20*time.Second)
	after := ev.wait(t, EventBeat, n+1, 20*time.Second)[n]
	if after.Index != 1 || after.Count != 1 {
		t.Fatalf("the first beat of the new session: %+v", after)
	}
	hb.Stop()
	deg := ev.of(EventDegraded)
	first, final := deg[0], deg[len(deg)-1]
	if first.Lost || first.Err.Code != CodeNetwork || !first.Err.NotSent || !first.LastBeatAt.Equal(last) {
		t.Fatalf("first: %+v %+v", first, first.Err)
	}
	if !final.Lost || final.Err.Code != CodeHeartbeatKilled || final.Err.Status != 403 {
		t.Fatalf("final: %+v %+v", final, final.Err)
	}
	if len(ev.of(EventRecovered)) != 1 || len(ev.of(EventKilled)) != 0 {
		t.Fatal(ev.summary())
	}
}

func TestIntegrationAnOutageDuringWhichTheKeyWasBannedEndsWithBanned(t *testing.T) {
	needServer(t)
	k := key(t, "PLAIN")
	c := newClient(t, "PLAIN", WithBaseURL(os.Getenv("KW_OUTAGE_URL")))
	must(c.Init(ctx))
	must(c.ActivateLicense(ctx, k, "sdk-go-hwid-aaaaaaaa"))
	hb, ev := start(t, c, HeartbeatOptions{SystemID: "sdk-go-outage-02", Interval: 200 * time.Millisecond, Reauth: true})
	ev.wait(t, EventBeat, 1, 10*time.Second)
	outage(t, 1500, k)
	e := ev.wait(t, EventKilled, 1, 20*time.Second)[0].Err
	if e.Code != CodeBanned || e.Status != 403 || e.Detail != "License key is banned" {
		t.Fatalf("%+v", e)
	}
	if len(ev.of(EventRecovered)) != 0 || hb.State() != StateKilled {
		t.Fatal(ev.summary())
	}
}

// --- the realtime channel ------------------------------------------------------------------------

func channelClient(t *testing.T, mode string) (*Client, string) {
	t.Helper()
	k := key(t, "PLAIN")
	c := newClient(t, "PLAIN", WithBaseURL(jsonEnv(t, "KW_CHANNEL_TAMPER_URLS", mode)))
	must(c.Init(ctx))
	must(c.ActivateLicense(ctx, k, hwid("channel")))
	return c, k
}

func TestIntegrationChannelBanPushedWithinASecond(t *testing.T) {
	needServer(t)
	c, k := channelClient(t, "pass")
	hb, ev := start(t, c, HeartbeatOptions{SystemID: "sdk-go-channel-01", Interval: 300 * time.Millisecond})
	ev.wait(t, EventBeat, 2, 10*time.Second)
	if !hb.OnChannel() || ev.of(EventChannel)[0].State != "open" {
		t.Fatalf("not on the channel: %s", ev.summary())
	}
	id := licenseID(t, jsonEnv(t, "KW_APP_IDS", "PLAIN"), k)
	var began time.Time
	revoked := ev.after(t, EventRevoked, 1, 5*time.Second, func() {
		began = time.Now()
		owner(t, "PATCH", "/api/licenses/"+id+"/ban", map[string]any{"banned": true})
	})[0]
	if took := time.Since(began); took > time.Second {
		t.Fatalf("the ban took %v", took)
	}
	if revoked.Reason != "license_banned" {
		t.Fatalf("%+v", revoked)
	}
	if e := ev.wait(t, EventKilled, 1, 5*time.Second)[0].Err; e.Code != CodeHeartbeatKilled || hb.State() != StateRevoked {
		t.Fatalf("%+v %s", e, hb.State())
	}
}

func notice(t *testing.T, message string) {
	t.Helper()
	owner(t, "POST", "/api/apps/"+jsonEnv(t, "KW_APP_IDS", "PLAIN")+"/notice", map[string]any{"message": message})
}

// closedFor returns the first channel closing refused for a verification reason.
func (r *events) closedFor() *Error {
	for _, e := range r.of(EventChannel) {
		if e.State == "closed" && e.Err != nil && e.Err.Code == CodeVerification {
			return e.Err
		}
	}
	return nil
}

func TestIntegrationChannelHelloForgedIsRefusedBeatsGoOnOverREST(t *testing.T) {
	needServer(t)
	c, _ := channelClient(t, "hello")
	hb, ev := start(t, c, HeartbeatOptions{SystemID: "sdk-go-channel-hello", Interval: 50 * time.Millisecond})
	beats := ev.wait(t, EventBeat, 2, 10*time.Second)
	if e := ev.closedFor(); e == nil || e.Reason != ReasonBadSignature || beats[1].Index != 2 || hb.OnChannel() {
		t.Fatalf("%s", ev.summary())
	}
}

// A pushed frame that does not verify is refused and never acted on; a new connection follows.
func TestIntegrationChannelPushedFrameRefused(t *testing.T) {
	needServer(t)
	for _, tc := range []struct {
		mode, reason string
		notices      int
	}{{"forge", ReasonBadMAC, 1}, {"swap", ReasonOutOfOrder, 2}} {
		tc := tc
		t.Run(tc.mode, func(t *testing.T) {
			c, _ := channelClient(t, tc.mode)
			hb, ev := start(t, c, HeartbeatOptions{SystemID: "sdk-go-channel-" + tc.mode, Interval: time.Minute})
			if !hb.OnChannel() {
				t.Fatalf("not on the channel: %s", ev.summary())
			}
			for i := 0; i < tc.notices; i++ {
				notice(t, fmt.Sprintf("tampered %d", i))
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				opens := 0
				for _, e := range ev.of(EventChannel) {
					if e.State == "open" {
						opens++
					}
				}
				if e := ev.closedFor(); e != nil && opens >= 2 {
					if e.Reason != tc.reason {
						t.Fatalf("reason %s: %s", e.Reason, ev.summary())
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no refusal and reconnection: %s", ev.summary())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if len(ev.of(EventNotice)) != 0 || hb.State() != StateHealthy {
				t.Fatalf("acted on a frame it refused: %s", ev.summary())
			}
		})
	}
}

func TestIntegrationChannelInjectFromAnotherConnectionRefused(t *testing.T) {
	needServer(t)
	// the first connection (another session) is the one the proxy records a frame of
	first, _ := channelClient(t, "inject")
	hb1, ev1 := start(t, first, HeartbeatOptions{SystemID: "sdk-go-inject-1", Interval: time.Minute})
	ev1.after(t, EventNotice, 1, 10*time.Second, func() { notice(t, "recorded") })
	c, _ := channelClient(t, "inject")
	hb, ev := start(t, c, HeartbeatOptions{SystemID: "sdk-go-inject-2", Interval: 50 * time.Millisecond})
	ev.wait(t, EventBeat, 2, 10*time.Second) // started and beating over REST
	if e := ev.closedFor(); e == nil || e.Reason != ReasonBadMAC || len(ev.of(EventNotice)) != 0 || hb.State() != StateHealthy {
		t.Fatalf("%s", ev.summary())
	}
	hb1.Stop()
}

func TestIntegrationChannelAbsentBeatsOverREST(t *testing.T) {
	needServer(t)
	c, _ := channelClient(t, "absent")
	hb, ev := start(t, c, HeartbeatOptions{SystemID: "sdk-go-channel-absent", Interval: 200 * time.Millisecond})
	ev.wait(t, EventBeat, 3, 20*time.Second)
	if hb.OnChannel() {
		t.Fatal("on a channel the server does not offer")
	}
	ch := ev.of(EventChannel)
	if len(ch) != 1 || ch[0].State != "closed" || ch[0].Err == nil {
		t.Fatalf("asked again or wrongly: %s", ev.summary())
	}
}

func TestIntegrationChannelDroppedThenBack(t *testing.T) {
	needServer(t)
	c, _ := channelClient(t, "drop")
	hb, ev := start(t, c, HeartbeatOptions{SystemID: "sdk-go-channel-drop", Interval: 200 * time.Millisecond})
	session := hb.Session()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ch := ev.of(EventChannel)
		opens := 0
		for _, e := range ch {
			if e.State == "open" {
				opens++
			}
		}
		if opens >= 2 && hb.OnChannel() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the channel did not come back: %s", ev.summary())
		}
		time.Sleep(50 * time.Millisecond)
	}
	n := len(ev.of(EventBeat))
	ev.wait(t, EventBeat, n+2, 10*time.Second)
	if hb.Session() != session || len(ev.of(EventRecovered)) != 0 || len(ev.of(EventDegraded)) != 0 {
		t.Fatalf("not the same chain: %s", ev.summary())
	}
}

// --- devices and seats (docs/protocol.md 12.1, 12.2) ------------------------------------------------------

func TestIntegrationDevicesAndSeats(t *testing.T) {
	needServer(t)
	k := os.Getenv("KW_GO_SEAT_KEY") // max_devices 2, max_sessions 1 (test/sdk/go.test.ts)
	if k == "" {
		t.Fatal("KW_GO_SEAT_KEY not set")
	}
	a, b, cc := hwid("dev-a"), hwid("dev-b"), hwid("dev-c")
	first := newClient(t, "PLAIN")
	must(first.Init(ctx))
	must(first.ActivateLicense(ctx, k, a))
	second := newClient(t, "PLAIN")
	must(second.Init(ctx))
	must(second.ActivateLicense(ctx, k, b))
	third := newClient(t, "PLAIN")
	must(third.Init(ctx))
	_, err := third.ActivateLicense(ctx, k, cc)
	fails(t, err, CodeHWIDMismatch)
	hb, ev := start(t, first, HeartbeatOptions{SystemID: a, Interval: 300 * time.Millisecond, ChannelOff: true})
	ev.wait(t, EventBeat, 1, 10*time.Second)
	_, err = second.StartHeartbeat(ctx, HeartbeatOptions{SystemID: b, CodeHash: code, ChannelOff: true, DebuggerDetected: func() bool { return false }})
	if e := fails(t, err, CodeSessionLimit); e.Status != 409 {
		t.Fatalf("%+v", e)
	}
	hb.Stop()
	// the seat is free once the first stopped
	hb2 := must(second.StartHeartbeat(ctx, HeartbeatOptions{SystemID: b, CodeHash: code, ChannelOff: true, DebuggerDetected: func() bool { return false }}))
	hb2.Stop()
}

// --- docs/protocol.md 12.8: a license that expires while running -------------------------------------------

// expire asks test/sdk/go.test.ts to move the key's expires_at to ms from now (in the database).
func expire(t *testing.T, k string, ms int) {
	t.Helper()
	if status, b := post(t, os.Getenv("KW_GO_CONTROL_URL")+"/expire", map[string]any{"key": k, "ms": ms}, nil); status != 200 {
		t.Fatalf("expire: %d %s", status, b)
	}
}

func checkExpired(t *testing.T, hb *Heartbeat, ev *events, c *Client) {
	t.Helper()
	x := ev.wait(t, EventExpired, 1, 10*time.Second)[0]
	k := ev.wait(t, EventKilled, 1, 5*time.Second)[0]
	if x.Err.Code != CodeExpired || k.Err.Code != CodeExpired || hb.State() != StateExpired || c.GraceUntil() != nil {
		t.Fatalf("%+v %+v %s: %s", x.Err, k.Err, hb.State(), ev.summary())
	}
	if s := ev.wait(t, EventStopped, 1, 5*time.Second)[0]; s.Reason != "killed" {
		t.Fatalf("%+v", s)
	}
}

func TestIntegrationExpiryPushedOnTheChannel(t *testing.T) {
	needServer(t)
	c, k := channelClient(t, "pass")
	hb, ev := start(t, c, HeartbeatOptions{SystemID: "sdk-go-expiry-channel", Interval: time.Minute})
	if !hb.OnChannel() {
		t.Fatalf("not on the channel: %s", ev.summary())
	}
	began := time.Now()
	expire(t, k, 1000)
	checkExpired(t, hb, ev, c)
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("the expiry took %v", took)
	}
	if r := ev.of(EventRevoked); len(r) != 1 || r[0].Reason != "expired" {
		t.Fatalf("%s", ev.summary())
	}
}

func TestIntegrationExpiryOverREST(t *testing.T) {
	needServer(t)
	k := key(t, "PLAIN")
	c := newClient(t, "PLAIN", WithHTTPClient(&http.Client{Transport: forwardedFor{ip: randomIP()}}))
	must(c.Init(ctx))
	must(c.ActivateLicense(ctx, k, hwid("expiry-rest")))
	hb, ev := start(t, c, HeartbeatOptions{SystemID: "sdk-go-expiry-rest", Interval: 300 * time.Millisecond, ChannelOff: true, Reauth: true})
	ev.wait(t, EventBeat, 1, 10*time.Second)
	expire(t, k, 500)
	checkExpired(t, hb, ev, c)
	if len(ev.of(EventRevoked)) != 0 || len(ev.of(EventRecovered)) != 0 {
		t.Fatalf("%s", ev.summary())
	}
}
