package keywarden

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Air-gapped machines (the server's docs/air-gapped.md; vectors: sdk/vectors/airgap.json).
//
// Activation request: "kwreq1." base64url(UTF-8 JSON {"v": 1, "app_id", "key", "hwid", "components"?,
// "nonce", "created_at"}), written with no network. The nonce (16 random bytes) stays in a small JSON
// file; the answer is an offline license file whose payload carries request_nonce, accepted only when
// every offline-file check passes and that nonce is the one of this machine's latest request (else
// offline_invalid / wrong_request).
//
// Seat pool: "kwpool1." base64url(PAYLOAD) "." base64url(Ed25519 over the part before the second dot),
// signed by a pinned response key. A relay hands it out with every lease; a lease is believed only when
// its pool verifies, names this application and is still valid.

// NoSeats is the relay's detail when every seat of its pool is leased (CodeSessionLimit).
const NoSeats = "No seats available"

// BuildActivationRequest is the request text for these values (nonce and time are the caller's).
func BuildActivationRequest(appID, key, hwid, nonce, createdAt string, components map[string]string) string {
	var b bytes.Buffer
	field := func(name string, v any) {
		raw, _ := json.Marshal(v)
		b.WriteString(`,"` + name + `":`)
		b.Write(raw)
	}
	b.WriteString(`{"v":1`)
	field("app_id", appID)
	field("key", key)
	field("hwid", hwid)
	if len(components) > 0 {
		field("components", components)
	}
	field("nonce", nonce)
	field("created_at", createdAt)
	b.WriteString("}")
	return "kwreq1." + base64.RawURLEncoding.EncodeToString(b.Bytes())
}

// CheckRequestNonce: after the offline-file checks passed, the answer's request_nonce must be nonce
// (nil: no request kept), else an offline_invalid error with reason wrong_request.
func CheckRequestNonce(file string, nonce *string) error {
	if e := checkRequestNonce(file, nonce); e != nil {
		return e
	}
	return nil
}

func checkRequestNonce(file string, nonce *string) *Error {
	if nonce == nil {
		return offlineError(OfflineWrongRequest, "no activation request is kept on this machine")
	}
	parts := strings.Split(strings.Trim(file, " \t\r\n"), ".")
	got := ""
	if len(parts) > 1 {
		var p map[string]any
		if raw := b64url(parts[1]); raw != nil && json.Unmarshal(raw, &p) == nil {
			got, _ = p["request_nonce"].(string)
		}
	}
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(*nonce)) != 1 {
		return offlineError(OfflineWrongRequest, "not the answer to this machine's latest activation request")
	}
	return nil
}

// SeatPool is a verified seat pool: what the relay's license grants and until when.
type SeatPool struct {
	AppID, LicenseID, RelayID string
	Seats, Level              int64
	Entitlements              []string // sorted
	ExpiresAt                 *time.Time
	ValidUntil, IssuedAt      time.Time
	Kid                       string
}

// VerifyPool checks a POOL in the order of airgap.json: malformed, unknown_kid, bad_signature, wrong_app,
// expired (offline_invalid errors with that reason); now in unix seconds.
func VerifyPool(pool string, keys []ResponseKey, appID string, now float64) (*SeatPool, error) {
	pinned, err := pinKeys(keys)
	if err != nil {
		return nil, err
	}
	p, e := verifyPool(pool, pinned, appID, now)
	if e != nil {
		return nil, e
	}
	return p, nil
}

func verifyPool(pool string, keys pinnedKeys, appID string, now float64) (*SeatPool, *Error) {
	signed, sig, p, e := openSigned(pool, "kwpool1")
	if e != nil {
		return nil, e
	}
	g := grantOf(p)
	seats, sok := jsonInt(p["seats"])
	good := g.ok && nonEmptyString(p, "kid") && nonEmptyString(p, "app_id") && nonEmptyString(p, "license_id") &&
		nonEmptyString(p, "relay_id") && sok && seats >= 1
	if !good {
		return nil, offlineError(OfflineMalformed, "pool payload lacks a field or has one of the wrong type")
	}
	kid := p["kid"].(string)
	key, ok := keys[kid]
	if !ok {
		return nil, offlineError(OfflineUnknownKid, fmt.Sprintf("pool signed under key %q, which this SDK does not pin", kid))
	}
	if !ed25519.Verify(key, []byte(signed), sig) {
		return nil, offlineError(OfflineBadSignature, "the pool's signature does not verify")
	}
	if p["app_id"] != appID {
		return nil, offlineError(OfflineWrongApp, fmt.Sprintf("pool issued for application %q", p["app_id"]))
	}
	if now*1000 >= float64(g.until) {
		return nil, offlineError(OfflineExpired, fmt.Sprintf("pool valid until %v", p["valid_until"]))
	}
	out := &SeatPool{
		AppID: appID, LicenseID: p["license_id"].(string), RelayID: p["relay_id"].(string), Seats: seats, Level: g.level,
		Entitlements: sortedSet(g.codes), ValidUntil: timeFromMs(g.until), IssuedAt: timeFromMs(g.issued), Kid: kid,
	}
	if ms, ok := parseUTCms(g.expires); ok {
		t := timeFromMs(ms)
		out.ExpiresAt = &t
	}
	return out, nil
}

// RequestFile is where ActivationRequest keeps its nonce (WithRequestFile).
func (c *Client) RequestFile() string {
	if c.requestFile != "" {
		return c.requestFile
	}
	return strings.TrimSuffix(c.StateFile(), ".json") + ".request.json"
}

func (c *Client) requireAppID() error {
	if c.cfg.AppID == "" {
		return configErr("app_id missing (offline files and pools are checked against it)")
	}
	return nil
}

// ActivationRequest writes a "kwreq1" activation request for key on this machine, with no network. Carry it
// to a connected machine (dashboard or customer portal); pass its answer to CompleteActivation. A new
// request replaces the kept nonce: answers to older ones are refused. hwid "" means MachineHWID.
func (c *Client) ActivationRequest(key, hwid string, components map[string]string) (string, error) {
	if err := c.requireAppID(); err != nil {
		return "", err
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	nonce := base64.RawURLEncoding.EncodeToString(b)
	created := c.clock().UTC().Format("2006-01-02T15:04:05.000Z")
	path := c.RequestFile()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	body, _ := json.Marshal(map[string]any{"v": 1, "nonce": nonce, "created_at": created})
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kwreq-")
	if err != nil {
		return "", err
	}
	_, werr := tmp.Write(body)
	cerr := tmp.Close()
	if werr == nil && cerr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		if werr == nil {
			werr = cerr
		}
		return "", werr
	}
	return BuildActivationRequest(c.cfg.AppID, key, c.hwidOr(hwid), nonce, created, components), nil
}

func (c *Client) keptNonce() *string {
	raw, err := os.ReadFile(c.RequestFile())
	if err != nil {
		return nil
	}
	var v struct {
		Nonce string `json:"nonce"`
	}
	if json.Unmarshal(raw, &v) != nil || v.Nonce == "" {
		return nil
	}
	return &v.Nonce
}

// CompleteActivation checks the answer to this machine's latest activation request: every check of
// LoadOffline, then its request_nonce (offline_invalid / wrong_request for an answer to an older request,
// or when no request is kept here). Save the answer; later starts check it with LoadOffline.
func (c *Client) CompleteActivation(response, hwid string) (*OfflineLicense, error) {
	lic, err := c.LoadOffline(response, hwid)
	if err != nil {
		return nil, err
	}
	if e := checkRequestNonce(response, c.keptNonce()); e != nil {
		c.log.Printf("keywarden.offline.refused: %s", e.Message)
		c.mu.Lock()
		c.entitlements = nil
		c.mu.Unlock()
		return nil, e
	}
	return lic, nil
}

// SeatLease is a floating seat leased from a relay, renewed by a goroutine at half its remaining time
// until Release. A lease the relay forgot (404) is taken again; one that cannot be kept sets Lost.
type SeatLease struct {
	c    *Client
	base string
	hwid string

	mu       sync.Mutex
	leaseID  string
	pool     *SeatPool
	expires  time.Time
	renewals int
	lost     *Error
	released bool
	stop     chan struct{}
	done     chan struct{}
}

// LeaseSeat leases a floating seat from a relay on the local network (instead of the service) and keeps
// it renewed. Believed only with a pool that verifies under the pinned keys and names this application
// (else offline_invalid); every seat taken: session_limit. Entitlements become the pool's.
func (c *Client) LeaseSeat(ctx context.Context, relayURL, hwid string) (*SeatLease, error) {
	if err := c.requireAppID(); err != nil {
		return nil, err
	}
	l := &SeatLease{c: c, base: strings.TrimRight(relayURL, "/"), hwid: c.hwidOr(hwid), stop: make(chan struct{}), done: make(chan struct{})}
	if e := l.take(ctx); e != nil {
		return nil, e
	}
	c.mu.Lock()
	c.entitlements = l.pool.Entitlements
	c.mu.Unlock()
	go l.run()
	return l, nil
}

func (l *SeatLease) send(ctx context.Context, method, path string, body any) (int, map[string]any, *Error) {
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(ctx, l.c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, l.base+path, rd)
	if err != nil {
		return 0, nil, newError(CodeNetwork, "network: relay %s: %v", l.base, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := l.c.http
	if client == nil {
		client = http.DefaultClient
	}
	res, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, newError(CodeTimeout, "timeout: relay %s: %v", l.base, err)
		}
		return 0, nil, newError(CodeNetwork, "network: relay %s: %v", l.base, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, l.c.maxResponse))
	var parsed map[string]any
	_ = json.Unmarshal(raw, &parsed)
	return res.StatusCode, parsed, nil
}

func relayRefused(status int, body map[string]any) *Error {
	detail, _ := body["detail"].(string)
	code := CodeServer
	if status == http.StatusConflict && detail == NoSeats {
		code = CodeSessionLimit
	}
	e := newError(code, "%s: relay answered %d %s", code, status, detail)
	e.Status, e.Detail = status, detail
	return e
}

func (l *SeatLease) accept(status int, p map[string]any, expect int) *Error {
	if status != expect {
		return relayRefused(status, p)
	}
	poolText, _ := p["pool"].(string)
	pool, e := verifyPool(poolText, l.c.keys, l.c.cfg.AppID, unixSeconds(l.c.clock()))
	if e != nil {
		return e
	}
	id, _ := p["lease_id"].(string)
	ms, ok := parseUTCms(p["expires_at"])
	if id == "" || !ok || p["hwid"] != strings.ToLower(l.hwid) {
		return offlineError(OfflineMalformed, "relay lease lacks lease_id or expires_at, or names another hwid")
	}
	l.mu.Lock()
	l.leaseID, l.pool, l.expires = id, pool, timeFromMs(ms)
	l.mu.Unlock()
	return nil
}

func (l *SeatLease) take(ctx context.Context) *Error {
	status, body, e := l.send(ctx, http.MethodPost, "/relay/v1/leases", map[string]string{"hwid": l.hwid})
	if e != nil {
		return e
	}
	return l.accept(status, body, http.StatusCreated)
}

func (l *SeatLease) path() string { return "/relay/v1/leases/" + url.PathEscape(l.LeaseID()) }

// Renew renews now; a lease the relay forgot is taken again.
func (l *SeatLease) Renew(ctx context.Context) error {
	if e := l.renew(ctx); e != nil {
		return e
	}
	return nil
}

func (l *SeatLease) renew(ctx context.Context) *Error {
	status, body, e := l.send(ctx, http.MethodPut, l.path(), nil)
	if e != nil {
		return e
	}
	if status == http.StatusNotFound {
		l.c.log.Printf("keywarden.relay.lease_gone: leasing again")
		e = l.take(ctx)
	} else {
		e = l.accept(status, body, http.StatusOK)
	}
	if e == nil {
		l.mu.Lock()
		l.renewals++
		l.mu.Unlock()
	}
	return e
}

func (l *SeatLease) run() {
	defer close(l.done)
	for {
		l.mu.Lock()
		wait := l.expires.Sub(l.c.clock()) / 2
		l.mu.Unlock()
		if wait < time.Second {
			wait = time.Second
		}
		select {
		case <-l.stop:
			return
		case <-time.After(wait):
		}
		e := l.renew(context.Background())
		if e == nil {
			continue
		}
		l.mu.Lock()
		retry := (e.Code == CodeNetwork || e.Code == CodeTimeout || e.Code == CodeServer) && l.c.clock().Before(l.expires)
		if !retry {
			l.lost = e
		}
		l.mu.Unlock()
		if !retry {
			l.c.log.Printf("keywarden.relay.lease_lost: %s", e.Message)
			return
		}
		l.c.log.Printf("keywarden.relay.renew_failed: %s", e.Message)
	}
}

// Release gives the seat back (DELETE); errors are only logged (an unreachable relay lets it expire).
func (l *SeatLease) Release() {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return
	}
	l.released = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	status, body, e := l.send(context.Background(), http.MethodDelete, l.path(), nil)
	if e == nil && status != http.StatusNoContent && status != http.StatusNotFound {
		e = relayRefused(status, body)
	}
	if e != nil {
		l.c.log.Printf("keywarden.relay.release_failed: %s", e.Message)
	}
}

// LeaseID is the relay's id of the current lease.
func (l *SeatLease) LeaseID() string { l.mu.Lock(); defer l.mu.Unlock(); return l.leaseID }

// Pool is the verified pool the relay serves.
func (l *SeatLease) Pool() *SeatPool { l.mu.Lock(); defer l.mu.Unlock(); return l.pool }

// ExpiresAt is when the current lease ends unless renewed.
func (l *SeatLease) ExpiresAt() time.Time { l.mu.Lock(); defer l.mu.Unlock(); return l.expires }

// Renewals counts the renewals so far.
func (l *SeatLease) Renewals() int { l.mu.Lock(); defer l.mu.Unlock(); return l.renewals }

// Lost is why the seat was lost, nil while held.
func (l *SeatLease) Lost() *Error { l.mu.Lock(); defer l.mu.Unlock(); return l.lost }

// Active is true while the lease is held and not past its expiry.
func (l *SeatLease) Active() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.released && l.lost == nil && l.c.clock().Before(l.expires)
}
