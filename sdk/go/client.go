// Package keywarden is the Keywarden client SDK for Go: signed requests, verified responses, typed
// errors, a heartbeat on the realtime channel with a REST fallback, and the licensing models of
// docs/protocol.md 12 (trials, entitlements, offline license files, grace). Standard library only.
//
// Every call carries a fresh nonce (and an HMAC when the config holds a secret), and every answer is
// verified against the pinned keys before a byte of it is believed (docs/protocol.md 3-5). Failures are *Error
// values with a Code; nothing here exits or panics the host program.
package keywarden

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	windowSeconds = 300
	clientPath    = "/api/client/"
	// A signed request refused with "Invalid request signature" is retried once when the (verified)
	// refusal just taught a clock offset larger than this.
	retryableOffsetSeconds = 60
)

// Logger is what WithLogger takes; *log.Logger fits.
type Logger interface {
	Printf(format string, args ...any)
}

type discard struct{}

func (discard) Printf(string, ...any) {}

// Option configures a Client.
type Option func(*Client) error

// WithBaseURL overrides the config's base_url.
func WithBaseURL(u string) Option {
	return func(c *Client) error {
		if !baseURLPattern.MatchString(u) {
			return configErr("base URL must be an http(s) URL")
		}
		c.baseURL = strings.TrimRight(u, "/")
		return nil
	}
}

// WithTimeout sets the time one call may take (default 10 s).
func WithTimeout(d time.Duration) Option {
	return func(c *Client) error {
		if d <= 0 {
			return configErr("timeout must be positive")
		}
		c.timeout = d
		return nil
	}
}

// WithRetries sets the extra attempts for a call that certainly never reached the server (default 2).
func WithRetries(n int) Option {
	return func(c *Client) error {
		if n < 0 {
			return configErr("retries must be >= 0")
		}
		c.retries = n
		return nil
	}
}

// WithHTTPClient sends the calls through your own *http.Client; the heartbeat then stays on REST.
func WithHTTPClient(h *http.Client) Option {
	return func(c *Client) error {
		if h == nil {
			return configErr("http client is nil")
		}
		c.http, c.customHTTP = h, true
		return nil
	}
}

// WithProxy sends the calls through an HTTP proxy (http://[user:pass@]host:port); the heartbeat then stays on REST.
func WithProxy(proxy string) Option {
	return func(c *Client) error {
		u, err := url.Parse(proxy)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return configErr("proxy must be an http(s) URL")
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = http.ProxyURL(u)
		c.http, c.customHTTP = &http.Client{Transport: t}, true
		return nil
	}
}

// WithLogger receives the SDK's log lines (default: none).
func WithLogger(l Logger) Option {
	return func(c *Client) error {
		if l != nil {
			c.log = l
		}
		return nil
	}
}

// WithClock replaces the local clock (the server's offset is learned on top of it).
func WithClock(now func() time.Time) Option {
	return func(c *Client) error {
		if now != nil {
			c.clock = now
		}
		return nil
	}
}

// WithEncKey asks for encrypted success bodies (docs/protocol.md 5); needs the config's api_secret.
func WithEncKey(key string) Option {
	return func(c *Client) error { c.encKey = key; return nil }
}

// WithMaxClockOffset is the largest clock offset adopted from the first verified answer (default 600 s).
func WithMaxClockOffset(d time.Duration) Option {
	return func(c *Client) error { c.maxOffset = d.Seconds(); return nil }
}

// WithRequestFile is where ActivationRequest keeps the nonce of this machine's latest activation request
// (default: the state file's path with ".request.json" instead of ".json").
func WithRequestFile(path string) Option {
	return func(c *Client) error { c.requestFile = path; return nil }
}

// WithStateFile is where offline license checks keep the latest time seen (default DefaultStateFile).
func WithStateFile(path string) Option {
	return func(c *Client) error { c.stateFile = path; return nil }
}

// WithMaxResponseBytes bounds an answer's body (default 1 MiB).
func WithMaxResponseBytes(n int64) Option {
	return func(c *Client) error {
		if n < 1024 {
			return configErr("max response bytes must be at least 1024")
		}
		c.maxResponse = n
		return nil
	}
}

// AppInfo is what init answers.
type AppInfo struct {
	Name     string
	Version  string
	HWIDLock bool
	Session  string
}

// UserInfo is what register and login answer.
type UserInfo struct {
	Username     string
	Level        int64
	ExpiresAt    *time.Time
	Message      string
	Entitlements []string
}

// LicenseInfo is what a license activation answers.
type LicenseInfo struct {
	Level        int64
	ExpiresAt    *time.Time // nil: a lifetime key
	Message      string
	Entitlements []string // sorted codes
}

// HasEntitlement reports whether the activation granted code.
func (l *LicenseInfo) HasEntitlement(code string) bool { return contains(l.Entitlements, code) }

// TrialInfo is what trial answers: a new key for this device, activated at once.
type TrialInfo struct {
	Key          string // the plaintext key: the server shows it this once
	Level        int64
	ExpiresAt    *time.Time
	Message      string
	Entitlements []string
}

// InitParams are init's optional integrity fields (docs/spec.md hash_check, binary_token).
type InitParams struct {
	BinaryHash      string
	BinaryToken     string
	BinaryTokenHash string
}

type activation struct {
	license            string
	username, password string
	hwid               string
}

// Client is a Keywarden client for one application: safe for concurrent use; one session at a time
// (Init replaces it).
type Client struct {
	cfg         *Config
	baseURL     string
	timeout     time.Duration
	retries     int
	log         Logger
	clock       func() time.Time
	http        *http.Client
	customHTTP  bool
	encKey      string
	maxOffset   float64
	stateFile   string
	requestFile string
	maxResponse int64
	keys        pinnedKeys

	mu             sync.Mutex
	offset         *float64
	session        string
	route          string
	initParams     InitParams
	lastActivation *activation
	expiresAt      *time.Time
	entitlements   []string
	grace          grace
	record         *clockRecord
}

// New makes a client from a parsed config.
func New(cfg *Config, opts ...Option) (*Client, error) {
	if cfg == nil {
		return nil, configErr("config is nil")
	}
	c := &Client{
		cfg: cfg, baseURL: strings.TrimRight(cfg.BaseURL, "/"), timeout: 10 * time.Second, retries: 2, log: discard{},
		clock: time.Now, maxOffset: 600, maxResponse: 1 << 20,
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if c.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		c.http = &http.Client{Transport: t}
	}
	if c.encKey != "" && cfg.APISecret == "" {
		return nil, configErr("enc key needs the api_secret of the config (docs/protocol.md 5 keys the cipher with it)")
	}
	keys, err := pinKeys(cfg.ResponseKeys)
	if err != nil || len(keys) == 0 {
		return nil, configErr("response_keys must list at least one valid key")
	}
	c.keys = keys
	return c, nil
}

// FromConfig makes a client from a keywarden.json file.
func FromConfig(path string, opts ...Option) (*Client, error) {
	cfg, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	return New(cfg, opts...)
}

// Config returns the client's configuration.
func (c *Client) Config() Config { return *c.cfg }

// Session is the session from Init, if any.
func (c *Client) Session() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// ClockOffset is server time minus local time, once learned from the first verified answer.
func (c *Client) ClockOffset() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.offset == nil {
		return 0, false
	}
	return time.Duration(*c.offset * float64(time.Second)), true
}

// ServerNow is the local clock corrected by the learned offset.
func (c *Client) ServerNow() time.Time {
	c.mu.Lock()
	off := 0.0
	if c.offset != nil {
		off = *c.offset
	}
	c.mu.Unlock()
	return c.clock().Add(time.Duration(off * float64(time.Second)))
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// MachineHWID is the salted machine id for this application (the api_key is the salt).
func (c *Client) MachineHWID() string { return MachineHWID(c.cfg.APIKey) }

// Entitlements are the codes of the last verified activation, or of the last offline file accepted by LoadOffline.
func (c *Client) Entitlements() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.entitlements...)
}

// HasEntitlement reports whether code is among Entitlements.
func (c *Client) HasEntitlement(code string) bool { return contains(c.Entitlements(), code) }

// LicenseExpiresAt is the expiry of the last verified activation (nil: none known, or a lifetime key).
func (c *Client) LicenseExpiresAt() *time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.expiresAt
}

// GraceUntil is until when the license stays valid while the service cannot be reached, from the latest
// verified answer; nil when it grants none or a verified refusal ended it.
func (c *Client) GraceUntil() *time.Time {
	if ms := c.grace.untilMs(); ms != 0 {
		t := timeFromMs(ms)
		return &t
	}
	return nil
}

// GraceActive reports whether the (server-corrected) clock is before GraceUntil.
func (c *Client) GraceActive() bool { return c.grace.activeAt(c.ServerNow()) }

func (c *Client) hwidOr(h string) string {
	if h != "" {
		return h
	}
	return c.MachineHWID()
}

func (c *Client) requireSession() (string, *Error) {
	if s := c.Session(); s != "" {
		return s, nil
	}
	return "", newError(CodeSessionExpired, "call Init first")
}

// Init opens a session; returns the application's info.
func (c *Client) Init(ctx context.Context) (*AppInfo, error) { return c.InitWith(ctx, InitParams{}) }

// InitWith is Init with the integrity fields.
func (c *Client) InitWith(ctx context.Context, p InitParams) (*AppInfo, error) {
	version := c.cfg.Version
	if version == "" {
		version = "1.0"
	}
	body := map[string]any{"api_key": c.cfg.APIKey, "version": version}
	if c.encKey != "" {
		body["enc_key"] = c.encKey
	}
	if p.BinaryHash != "" {
		body["binary_hash"] = p.BinaryHash
	}
	if p.BinaryToken != "" {
		body["binary_token"] = p.BinaryToken
		if p.BinaryTokenHash != "" {
			body["binary_token_hash"] = p.BinaryTokenHash
		}
	}
	c.mu.Lock()
	c.initParams = p
	c.route = "" // a new session lives wherever init lands
	c.mu.Unlock()
	r, err := c.call(ctx, "init", body)
	if err != nil {
		return nil, err
	}
	app, _ := r["app"].(map[string]any)
	session, _ := r["session"].(string)
	name, nok := app["name"].(string)
	if session == "" || !nok {
		return nil, verificationError(ReasonMalformed, "init answer lacks session or app")
	}
	c.mu.Lock()
	c.session = session
	c.mu.Unlock()
	info := &AppInfo{Name: name, Session: session}
	if v, ok := app["version"]; ok && v != nil {
		info.Version = fmt.Sprint(v)
	}
	info.HWIDLock = app["hwid_lock"] == true
	return info, nil
}

// entitlementsOf returns the sorted codes of an answer (absent: none); anything but a list of strings is malformed.
func entitlementsOf(r map[string]any) ([]string, *Error) {
	v, ok := r["entitlements"]
	if !ok || v == nil {
		return []string{}, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, verificationError(ReasonMalformed, "entitlements is not a list of codes")
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, verificationError(ReasonMalformed, "entitlements is not a list of codes")
		}
		out = append(out, s)
	}
	return sortedSet(out), nil
}

// activated books a verified activation answer: its entitlements, its expiry and its grace.
func (c *Client) activated(r map[string]any, expires *time.Time, a *activation) ([]string, *Error) {
	ents, err := entitlementsOf(r)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.entitlements = ents
	c.expiresAt = expires
	if a != nil {
		c.lastActivation = a
	}
	c.mu.Unlock()
	c.grace.note(r)
	return ents, nil
}

func (c *Client) user(r map[string]any) (*UserInfo, *Error) {
	u, _ := r["user"].(map[string]any)
	name, nok := u["username"].(string)
	level, lok := jsonInt(u["level"])
	if !nok || !lok {
		return nil, verificationError(ReasonMalformed, "answer lacks user")
	}
	msg, _ := r["message"].(string)
	return &UserInfo{Username: name, Level: level, ExpiresAt: parseTime(u["expires_at"]), Message: msg}, nil
}

// Register registers, then logs in at once and ignores that login's failure (as reference clients do).
// hwid "" means MachineHWID.
func (c *Client) Register(ctx context.Context, username, password, license, hwid string) (*UserInfo, error) {
	s, e := c.requireSession()
	if e != nil {
		return nil, e
	}
	h := c.hwidOr(hwid)
	r, err := c.call(ctx, "register", map[string]any{"session": s, "username": username, "password": password, "license": license, "hwid": h})
	if err != nil {
		return nil, err
	}
	u, e := c.user(r)
	if e != nil {
		return nil, e
	}
	if u.Entitlements, e = c.activated(r, u.ExpiresAt, &activation{username: username, password: password, hwid: h}); e != nil {
		return nil, e
	}
	if _, err := c.Login(ctx, username, password, h); err != nil {
		c.log.Printf("keywarden.register.login_failed: %v", err)
	}
	return u, nil
}

// Login logs an end user in; hwid "" means MachineHWID.
func (c *Client) Login(ctx context.Context, username, password, hwid string) (*UserInfo, error) {
	s, e := c.requireSession()
	if e != nil {
		return nil, e
	}
	h := c.hwidOr(hwid)
	r, err := c.call(ctx, "login", map[string]any{"session": s, "username": username, "password": password, "hwid": h})
	if err != nil {
		return nil, err
	}
	u, e := c.user(r)
	if e != nil {
		return nil, e
	}
	if u.Entitlements, e = c.activated(r, u.ExpiresAt, &activation{username: username, password: password, hwid: h}); e != nil {
		return nil, e
	}
	return u, nil
}

// ActivateLicense is a license-only activation; hwid "" means MachineHWID.
func (c *Client) ActivateLicense(ctx context.Context, key, hwid string) (*LicenseInfo, error) {
	s, e := c.requireSession()
	if e != nil {
		return nil, e
	}
	h := c.hwidOr(hwid)
	r, err := c.call(ctx, "license", map[string]any{"session": s, "license": key, "hwid": h})
	if err != nil {
		return nil, err
	}
	level, ok := jsonInt(r["level"])
	if !ok {
		return nil, verificationError(ReasonMalformed, "license answer lacks level")
	}
	msg, _ := r["message"].(string)
	info := &LicenseInfo{Level: level, ExpiresAt: parseTime(r["expires_at"]), Message: msg}
	if info.Entitlements, e = c.activated(r, info.ExpiresAt, &activation{license: key, hwid: h}); e != nil {
		return nil, e
	}
	return info, nil
}

// Trial creates this device's trial key and activates it (POST /api/client/trial). Once per device and
// application: again answers trial_used; trial_disabled when the application offers none. The key is
// remembered for re-authentication.
func (c *Client) Trial(ctx context.Context, hwid string) (*TrialInfo, error) {
	s, e := c.requireSession()
	if e != nil {
		return nil, e
	}
	h := c.hwidOr(hwid)
	r, err := c.call(ctx, "trial", map[string]any{"session": s, "hwid": h})
	if err != nil {
		return nil, err
	}
	key, _ := r["key"].(string)
	level, ok := jsonInt(r["level"])
	if key == "" || !ok {
		return nil, verificationError(ReasonMalformed, "trial answer lacks key or level")
	}
	msg, _ := r["message"].(string)
	t := &TrialInfo{Key: key, Level: level, ExpiresAt: parseTime(r["expires_at"]), Message: msg}
	if t.Entitlements, e = c.activated(r, t.ExpiresAt, &activation{license: key, hwid: h}); e != nil {
		return nil, e
	}
	return t, nil
}

// OfflineFile asks for an offline license file for this machine (POST /api/client/offline), after a
// successful activation on this session. Save it; LoadOffline checks it without the service.
func (c *Client) OfflineFile(ctx context.Context, hwid string) (string, error) {
	s, e := c.requireSession()
	if e != nil {
		return "", e
	}
	r, err := c.call(ctx, "offline", map[string]any{"session": s, "hwid": c.hwidOr(hwid)})
	if err != nil {
		return "", err
	}
	f, _ := r["license_file"].(string)
	if !strings.HasPrefix(f, "kwlic1.") {
		return "", verificationError(ReasonMalformed, "offline answer lacks license_file")
	}
	return f, nil
}

// StateFile is where LoadOffline keeps the latest time seen.
func (c *Client) StateFile() string { return c.clockRecord().path }

func (c *Client) clockRecord() *clockRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.record == nil {
		p := c.stateFile
		if p == "" {
			p = DefaultStateFile(c.cfg.APIKey)
		}
		c.record = &clockRecord{path: p, log: c.log}
	}
	return c.record
}

// LoadOffline checks an offline license file without the service (docs/protocol.md 12.5). Refusals are
// offline_invalid errors with an offline reason. Every check records the clock in the state file. On
// success Entitlements are the file's. hwid "" means MachineHWID.
func (c *Client) LoadOffline(file, hwid string) (*OfflineLicense, error) {
	if c.cfg.AppID == "" {
		return nil, configErr("app_id missing (offline license files are checked against it)")
	}
	rec := c.clockRecord()
	now := unixSeconds(c.clock())
	lic, err := verifyLicenseFile(file, c.keys, c.cfg.AppID, c.hwidOr(hwid), now, rec.lastSeen())
	rec.record(now)
	if err != nil {
		c.log.Printf("keywarden.offline.refused: %s", err.Message)
		return nil, err
	}
	c.mu.Lock()
	c.entitlements = lic.Entitlements
	c.mu.Unlock()
	return lic, nil
}

// Reauthenticate runs init and the remembered activation again (a heartbeat whose state was lost).
func (c *Client) Reauthenticate(ctx context.Context) error {
	c.mu.Lock()
	a, p := c.lastActivation, c.initParams
	c.mu.Unlock()
	if a == nil {
		return newError(CodeSessionExpired, "nothing to re-authenticate with: no login or license succeeded on this client")
	}
	if _, err := c.InitWith(ctx, p); err != nil {
		return err
	}
	var err error
	if a.license != "" {
		_, err = c.ActivateLicense(ctx, a.license, a.hwid)
	} else {
		_, err = c.Login(ctx, a.username, a.password, a.hwid)
	}
	return err
}

func (c *Client) noteRefusal(status int) {
	if isRefusal(status) && c.grace.untilMs() != 0 {
		c.log.Printf("keywarden.grace.ended: a verified %d refusal", status)
		c.grace.end()
	}
}

// --- the wire ---------------------------------------------------------------------------------------

func randomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand failing is not recoverable in a meaningful way; a time-based fallback keeps the
		// nonce unique, which is all it must be.
		return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(time.Now().UnixNano(), 36)))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

type clockSkew struct{ *Error }

// Call is one verified client call (endpoint like "license"); it returns the answer object. It sends
// again (fresh nonce, same body) only when the request certainly never reached the server, or once after
// the server refused the request signature while the clock was off (learned from that signed answer).
func (c *Client) Call(ctx context.Context, endpoint string, body map[string]any) (map[string]any, error) {
	r, err := c.call(ctx, endpoint, body)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (c *Client) call(ctx context.Context, endpoint string, body map[string]any) (map[string]any, *Error) {
	if ctx == nil {
		ctx = context.Background()
	}
	attempt, clockRetried := 0, false
	for {
		r, err, skew := c.once(ctx, endpoint, body)
		if err == nil {
			return r, nil
		}
		if skew && !clockRetried {
			clockRetried = true
			c.log.Printf("keywarden.call.clock_retry: %s", endpoint)
			continue
		}
		if err.NotSent && attempt < c.retries && ctx.Err() == nil {
			attempt++
			delay := time.Duration(math.Min(2, 0.1*math.Pow(2, float64(attempt))) * float64(time.Second))
			select {
			case <-time.After(delay):
				continue
			case <-ctx.Done():
			}
		}
		return nil, err
	}
}

func (c *Client) once(ctx context.Context, endpoint string, body map[string]any) (map[string]any, *Error, bool) {
	path := clientPath + endpoint
	payload := make(map[string]any, len(body)+1)
	for k, v := range body {
		payload[k] = v
	}
	initIV := ""
	if c.encKey != "" {
		initIV = randomToken(16)
		payload["init_iv"] = initIV
	}
	raw, jerr := json.Marshal(payload)
	if jerr != nil {
		return nil, newError(CodeServer, "cannot encode the request: %v", jerr), false
	}
	nonce := randomToken(18)
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, rerr := http.NewRequestWithContext(cctx, http.MethodPost, c.baseURL+path, bytes.NewReader(raw))
	if rerr != nil {
		return nil, newError(CodeNetwork, "network on %s: %v", path, rerr), false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Nonce", nonce)
	c.mu.Lock()
	route := c.route
	hadOffset := c.offset != nil
	c.mu.Unlock()
	if route != "" {
		req.Header.Set("X-Keywarden-Route", route)
	}
	if c.cfg.APISecret != "" {
		ts := strconv.FormatInt(int64(unixSeconds(c.ServerNow())), 10)
		req.Header.Set("X-Timestamp", ts)
		req.Header.Set("X-Signature", RequestSignature(c.cfg.APISecret, CanonicalRequest("POST", path, ts, nonce, raw)))
	}
	res, herr := c.http.Do(req)
	if herr != nil {
		c.dropRoute()
		return nil, transportError(path, herr, cctx), false
	}
	resBody, berr := io.ReadAll(io.LimitReader(res.Body, c.maxResponse+1))
	res.Body.Close()
	if berr != nil {
		c.dropRoute()
		e := transportError(path, berr, cctx)
		e.NotSent = false
		return nil, e, false
	}
	if int64(len(resBody)) > c.maxResponse {
		return nil, newError(CodeNetwork, "network on %s: answer larger than %d bytes", path, c.maxResponse), false
	}
	status := res.StatusCode
	gateway := status == 502 || status == 503 || status == 504
	if gateway {
		// Signed or not (a balancer's own answer is not), the worker the route names may be gone.
		// Dropping a hint is all a forged answer could achieve: the next call is forwarded once.
		c.dropRoute()
	}
	kid, ts, sig := res.Header.Get("X-Response-Kid"), res.Header.Get("X-Response-Timestamp"), res.Header.Get("X-Response-Signature")
	if gateway && kid == "" && ts == "" && sig == "" {
		// A proxy in front saying the service is unreachable: believed for nothing, but not an attack either.
		e := newError(CodeServer, "server: %d from a gateway (unsigned) on %s", status, path)
		e.Status = status
		return nil, e, false
	}
	limit := float64(windowSeconds)
	if !hadOffset {
		// Before the offset is known a larger distance is allowed: the answer is bound to this request's
		// fresh nonce, so it cannot be an old one replayed.
		limit = c.maxOffset
	}
	serverTs, verr := verifyResponse(c.keys, signedAnswer{method: "POST", path: path, status: status, kid: kid, ts: ts, sig: sig, body: resBody, nonce: nonce}, unixSeconds(c.ServerNow()), limit)
	if verr != nil {
		return nil, verr, false
	}
	c.mu.Lock()
	if c.offset == nil {
		off := float64(serverTs) - unixSeconds(c.clock())
		c.offset = &off
		if math.Abs(off) > 5 {
			c.log.Printf("keywarden.clock.offset: %.1f s", off)
		}
	}
	if r := res.Header.Get("X-Keywarden-Route"); r != "" && !gateway {
		c.route = r
	}
	learned := c.offset
	c.mu.Unlock()
	parsed, perr := parseObject(resBody, path, status)
	if perr != nil {
		return nil, perr, false
	}
	if status != 200 {
		c.noteRefusal(status)
		e := errorFromAnswer(status, parsed["detail"], res.Header.Get("Retry-After"))
		skew := e.Code == CodeClockSkew && c.cfg.APISecret != "" && !hadOffset && learned != nil && math.Abs(*learned) > retryableOffsetSeconds
		return nil, e, skew
	}
	if enc, ok := parsed["enc"].(string); ok && initIV != "" {
		plain, derr := DecryptResponse(enc, c.encKey, c.cfg.APISecret, initIV)
		if derr != nil {
			return nil, verificationError(ReasonMalformed, fmt.Sprintf("encrypted answer of %s does not decrypt", path)), false
		}
		if parsed, perr = parseObject(plain, path, status); perr != nil {
			return nil, perr, false
		}
	}
	if parsed["success"] != true {
		return nil, verificationError(ReasonMalformed, fmt.Sprintf("answer of %s lacks success: true", path)), false
	}
	return parsed, nil, false
}

// dropRoute forgets the route hint after a connection error, a timeout or a 502/503/504: the worker
// it names may be gone, and without it the balancer sends the next call to any live worker, whose
// answer names the session's new owner.
func (c *Client) dropRoute() {
	c.mu.Lock()
	c.route = ""
	c.mu.Unlock()
}

func parseObject(raw []byte, path string, status int) (map[string]any, *Error) {
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil || v == nil {
		return nil, verificationError(ReasonMalformed, fmt.Sprintf("answer of %s (%d) is not a JSON object", path, status))
	}
	return v, nil
}

// transportError classifies a failed exchange: timeout or network, and whether it certainly never left.
func transportError(path string, err error, ctx context.Context) *Error {
	var ne net.Error
	timeout := errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) || ctx.Err() == context.DeadlineExceeded
	var op *net.OpError
	notSent := errors.As(err, &op) && op.Op == "dial"
	code := CodeNetwork
	if timeout {
		code = CodeTimeout
	}
	e := newError(code, "%s on %s: %v", code, path, err)
	e.NotSent = notSent
	return e
}
