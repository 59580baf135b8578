package keywarden

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// Offline license files (docs/protocol.md 12.5) and the clock record that guards them.
//
// A file is "kwlic1." base64url(PAYLOAD) "." base64url(Ed25519("kwlic1." base64url(PAYLOAD))), signed by
// one of the pinned response-signing keys. It is accepted only when, in this order (shared by every SDK,
// fixed by sdk/vectors/offline.json): it has that shape and PAYLOAD is the JSON object 12.5 describes
// (malformed), its kid is pinned (unknown_kid), the signature verifies (bad_signature), app_id is this
// application's (wrong_app), hwid is this machine's, lower-cased (wrong_hwid), the clock is not more than
// 300 s below the latest time seen (clock_rolled_back), issued_at is at most 300 s ahead of the clock
// (issued_in_future), the clock is before valid_until (expired).

const (
	maxFutureSeconds   = 300
	maxRollbackSeconds = 300
)

// OfflineLicense is a verified offline license file: what it grants and until when.
type OfflineLicense struct {
	AppID     string
	LicenseID string
	// User is the username of a user license, "" for a license-only key.
	User         string
	HWID         string
	Level        int64
	Entitlements []string // sorted
	// ExpiresAt is the key's own expiry, nil for a lifetime key.
	ExpiresAt  *time.Time
	IssuedAt   time.Time
	ValidUntil time.Time
	Kid        string
}

// HasEntitlement reports whether the file grants code.
func (l *OfflineLicense) HasEntitlement(code string) bool { return contains(l.Entitlements, code) }

var b64urlPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func b64url(s string) []byte {
	if !b64urlPattern.MatchString(s) || len(s)%4 == 1 {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

func nonEmptyString(p map[string]any, name string) bool {
	s, ok := p[name].(string)
	return ok && s != ""
}

func sortedSet(in []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// VerifyLicenseFile checks file as the package comment says; now and lastSeen in unix seconds (lastSeen
// nil: no record). The error is a *Error with CodeOfflineInvalid and an offline reason.
func VerifyLicenseFile(file string, keys []ResponseKey, appID, hwid string, now float64, lastSeen *float64) (*OfflineLicense, error) {
	pinned, err := pinKeys(keys)
	if err != nil {
		return nil, err
	}
	lic, e := verifyLicenseFile(file, pinned, appID, hwid, now, lastSeen)
	if e != nil {
		return nil, e
	}
	return lic, nil
}

// openSigned splits "<tag>.<payload>.<signature>" and decodes it: the signed text, the 64-byte signature and
// the payload object, else a malformed error. Shared by license files (kwlic1) and seat pools (kwpool1).
func openSigned(text, tag string) (string, []byte, map[string]any, *Error) {
	parts := strings.Split(strings.Trim(text, " \t\r\n"), ".")
	if len(parts) != 3 || parts[0] != tag {
		return "", nil, nil, offlineError(OfflineMalformed, fmt.Sprintf(`not "%s.<payload>.<signature>"`, tag))
	}
	raw, sig := b64url(parts[1]), b64url(parts[2])
	if raw == nil || sig == nil || len(sig) != 64 {
		return "", nil, nil, offlineError(OfflineMalformed, "payload or signature is not base64url (a signature is 64 bytes)")
	}
	var p map[string]any
	if err := json.Unmarshal(raw, &p); err != nil || p == nil {
		return "", nil, nil, offlineError(OfflineMalformed, "payload is not a UTF-8 JSON object")
	}
	return tag + "." + parts[1], sig, p, nil
}

// grant is what files and pools both grant, read from a payload; ok is false when a field is missing or of
// the wrong type (v 1, an integer level, entitlement codes, expires_at a time or null, issued_at, valid_until).
type grant struct {
	level, issued, until int64
	codes                []string
	expires              any
	ok                   bool
}

func grantOf(p map[string]any) grant {
	v, vok := jsonInt(p["v"])
	level, lok := jsonInt(p["level"])
	ents, eok := p["entitlements"].([]any)
	var codes []string
	for _, x := range ents {
		s, ok := x.(string)
		if !ok {
			eok = false
		}
		codes = append(codes, s)
	}
	expires, hasExpires := p["expires_at"]
	_, expiresOK := parseUTCms(expires)
	issued, iok := parseUTCms(p["issued_at"])
	until, uok := parseUTCms(p["valid_until"])
	return grant{level: level, issued: issued, until: until, codes: codes, expires: expires,
		ok: vok && v == 1 && lok && eok && hasExpires && (expires == nil || expiresOK) && iok && uok}
}

func verifyLicenseFile(file string, keys pinnedKeys, appID, hwid string, now float64, lastSeen *float64) (*OfflineLicense, *Error) {
	signed, sig, p, e := openSigned(file, "kwlic1")
	if e != nil {
		return nil, e
	}
	g := grantOf(p)
	level, codes, expires, issued, until := g.level, g.codes, g.expires, g.issued, g.until
	user, hasUser := p["user"]
	_, userOK := user.(string)
	good := g.ok && nonEmptyString(p, "kid") && nonEmptyString(p, "app_id") && nonEmptyString(p, "license_id") &&
		nonEmptyString(p, "hwid") && hasUser && (user == nil || userOK)
	if !good {
		return nil, offlineError(OfflineMalformed, "payload lacks a field of docs/protocol.md 12.5 or has one of the wrong type")
	}
	kid := p["kid"].(string)
	key, ok := keys[kid]
	if !ok {
		return nil, offlineError(OfflineUnknownKid, fmt.Sprintf("signed under key %q, which this SDK does not pin", kid))
	}
	if !ed25519.Verify(key, []byte(signed), sig) {
		return nil, offlineError(OfflineBadSignature, "the signature does not verify")
	}
	if p["app_id"] != appID {
		return nil, offlineError(OfflineWrongApp, fmt.Sprintf("issued for application %q", p["app_id"]))
	}
	if p["hwid"] != strings.ToLower(hwid) {
		return nil, offlineError(OfflineWrongHWID, "issued for another machine")
	}
	nowMs := now * 1000
	if lastSeen != nil && nowMs < (*lastSeen-maxRollbackSeconds)*1000 {
		return nil, offlineError(OfflineClockRolledBack, fmt.Sprintf("the clock reads %.0f s before a time already seen", *lastSeen-now))
	}
	if float64(issued) > nowMs+maxFutureSeconds*1000 {
		return nil, offlineError(OfflineIssuedInFuture, fmt.Sprintf("issued %.0f s ahead of the clock", float64(issued)/1000-now))
	}
	if nowMs >= float64(until) {
		return nil, offlineError(OfflineExpired, fmt.Sprintf("valid until %v", p["valid_until"]))
	}
	lic := &OfflineLicense{
		AppID: appID, LicenseID: p["license_id"].(string), HWID: p["hwid"].(string), Level: level,
		Entitlements: sortedSet(codes), IssuedAt: timeFromMs(issued), ValidUntil: timeFromMs(until), Kid: kid,
	}
	if u, ok := user.(string); ok {
		lic.User = u
	}
	if ms, ok := parseUTCms(expires); ok {
		t := timeFromMs(ms)
		lic.ExpiresAt = &t
	}
	return lic, nil
}

// DefaultStateFile is where offline checks keep the latest time seen, per user and application:
// <state dir>/keywarden/<first 16 hex of sha256(api_key)>.json; the state dir is %LOCALAPPDATA%
// (Windows), ~/Library/Application Support (macOS), else $XDG_STATE_HOME or ~/.local/state.
func DefaultStateFile(apiKey string) string {
	h := sha256.Sum256([]byte(apiKey))
	name := hex.EncodeToString(h[:])[:16] + ".json"
	home, _ := os.UserHomeDir()
	switch runtime.GOOS {
	case "windows":
		base := os.Getenv("LOCALAPPDATA")
		if base == "" {
			base = filepath.Join(home, "AppData", "Local")
		}
		return filepath.Join(base, "Keywarden", name)
	case "darwin":
		return filepath.Join(home, "Library", "Application Support", "Keywarden", name)
	}
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "keywarden", name)
}

// clockRecord is the latest clock reading seen, kept in {"v": 1, "last_seen": <unix seconds>}. An
// unreadable or damaged file counts as no record; one that cannot be written is logged and the check goes on.
type clockRecord struct {
	path string
	log  Logger
	mu   sync.Mutex
}

func (r *clockRecord) lastSeen() *float64 {
	data, err := os.ReadFile(r.path)
	if err != nil {
		if !os.IsNotExist(err) {
			r.log.Printf("keywarden.offline.state_unreadable: %s: %v", r.path, err)
		}
		return nil
	}
	var v map[string]any
	if json.Unmarshal(data, &v) != nil {
		r.log.Printf("keywarden.offline.state_unreadable: %s: not JSON", r.path)
		return nil
	}
	seen, ok := v["last_seen"].(float64)
	if !ok || math.IsNaN(seen) {
		r.log.Printf("keywarden.offline.state_unreadable: %s: no last_seen", r.path)
		return nil
	}
	return &seen
}

// record sets last_seen = max(last_seen, now), atomically (a temporary file, then a rename).
func (r *clockRecord) record(now float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seen := r.lastSeen(); seen != nil && *seen >= now {
		return
	}
	dir := filepath.Dir(r.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		r.log.Printf("keywarden.offline.state_unwritable: %s: %v", r.path, err)
		return
	}
	f, err := os.CreateTemp(dir, ".kwstate-")
	if err != nil {
		r.log.Printf("keywarden.offline.state_unwritable: %s: %v", r.path, err)
		return
	}
	_, werr := fmt.Fprintf(f, `{"v": 1, "last_seen": %d}`, int64(now))
	cerr := f.Close()
	if werr != nil || cerr != nil {
		os.Remove(f.Name())
		r.log.Printf("keywarden.offline.state_unwritable: %s", r.path)
		return
	}
	if err := os.Rename(f.Name(), r.path); err != nil {
		os.Remove(f.Name())
		r.log.Printf("keywarden.offline.state_unwritable: %s: %v", r.path, err)
	}
}
