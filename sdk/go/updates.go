package keywarden

// Updates: the upgrade check's offer and the verified download of an artifact. An offer is believed
// only when every artifact carries an Ed25519 signature, by a pinned response-signing key, over
// "kwart1.<app_id>.<version>.<filename>.<sha512 hex>" (the server's docs/releases.md "Artifacts";
// sdk/vectors/artifacts.json fixes the order of the checks). A download streams into a temporary
// file next to the target, checks size, SHA-512 and that signature, and only then renames it over
// the target; any failure removes the temporary file and returns an *UpdateError.

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Update reasons (the same strings in every SDK).
const (
	UpdateUnknownKid     = "unknown_kid"
	UpdateBadSignature   = "bad_signature"
	UpdateSizeMismatch   = "size_mismatch"
	UpdateSha512Mismatch = "sha512_mismatch"
	UpdateDownloadFailed = "download_failed"
)

// UpdateError is an update refused. Code is CodeVerification for the reasons unknown_kid, bad_signature,
// size_mismatch and sha512_mismatch; for download_failed it is CodeServer (Status and Detail of the link's
// answer kept, e.g. 403 "Download link expired"), CodeNetwork or CodeTimeout. errors.As(err, &*Error) also
// matches it (Unwrap).
type UpdateError struct {
	Code    ErrorCode
	Reason  string
	Message string
	Status  int
	Detail  any
}

func (e *UpdateError) Error() string { return e.Message }

// Unwrap gives the same failure as an *Error, for code that handles every SDK error alike.
func (e *UpdateError) Unwrap() error {
	return &Error{Code: e.Code, Message: e.Message, Status: e.Status, Detail: e.Detail, Reason: e.Reason, RetryAfter: -1}
}

func updateErr(code ErrorCode, reason, format string, a ...any) *UpdateError {
	return &UpdateError{Code: code, Reason: reason, Message: "update refused (" + reason + "): " + fmt.Sprintf(format, a...)}
}

// Artifact is one file of an offered release, its signature already verified.
type Artifact struct {
	AppID        string
	Version      string // the release's version (part of the signed message)
	Filename     string
	Platform     string
	Arch         string
	Size         int64
	Sha512       string
	Signature    string
	Kid          string
	URL          string
	URLExpiresAt *time.Time
}

// UpdateOffer is the release an upgrade check offers.
type UpdateOffer struct {
	Version     string
	Channel     string
	Notes       string
	PublishedAt *time.Time
	Artifacts   []Artifact
}

// ArtifactMessage is what an artifact's signature covers.
func ArtifactMessage(appID, version, filename, sha512Hex string) string {
	return "kwart1." + appID + "." + version + "." + filename + "." + sha512Hex
}

func verifyArtifact(keys pinnedKeys, a *Artifact) *UpdateError {
	key, ok := keys[a.Kid]
	if !ok {
		return updateErr(CodeVerification, UpdateUnknownKid, "%s is signed by unpinned key %q", a.Filename, a.Kid)
	}
	sig := decodeSignature(a.Signature)
	if sig == nil || !ed25519.Verify(key, []byte(ArtifactMessage(a.AppID, a.Version, a.Filename, a.Sha512)), sig) {
		return updateErr(CodeVerification, UpdateBadSignature, "signature of %s %s does not verify", a.Filename, a.Version)
	}
	return nil
}

func parseOffer(u map[string]any, appID string, keys pinnedKeys) (*UpdateOffer, error) {
	text := func(o map[string]any, name string) (string, *Error) {
		v, ok := o[name].(string)
		if !ok || v == "" {
			return "", verificationError(ReasonMalformed, "upgrade answer lacks "+name)
		}
		return v, nil
	}
	version, e := text(u, "version")
	if e != nil {
		return nil, e
	}
	listed, ok := u["artifacts"].([]any)
	if !ok || len(listed) == 0 {
		return nil, verificationError(ReasonMalformed, "upgrade answer lists no artifacts")
	}
	offer := &UpdateOffer{Version: version, PublishedAt: parseTime(u["published_at"])}
	offer.Channel, _ = u["channel"].(string)
	offer.Notes, _ = u["notes"].(string)
	for _, item := range listed {
		o, ok := item.(map[string]any)
		size, sized := jsonInt(o["size"])
		if !ok || !sized || size < 0 {
			return nil, verificationError(ReasonMalformed, "an artifact is not an object with a size")
		}
		a := Artifact{AppID: appID, Version: version, Size: size, URLExpiresAt: parseTime(o["url_expires_at"])}
		for name, into := range map[string]*string{
			"filename": &a.Filename, "platform": &a.Platform, "arch": &a.Arch, "sha512": &a.Sha512,
			"signature": &a.Signature, "kid": &a.Kid, "url": &a.URL,
		} {
			if *into, e = text(o, name); e != nil {
				return nil, e
			}
		}
		if ue := verifyArtifact(keys, &a); ue != nil {
			return nil, ue
		}
		offer.Artifacts = append(offer.Artifacts, a)
	}
	return offer, nil
}

// CheckUpdate asks for the newest release above version this activated key may install on platform/arch
// (channels stable < rc < beta < alpha < dev: a channel is offered itself and everything more stable;
// empty arguments mean "stable", "any", "any"). nil, or the offer whose every artifact's signature verified
// under the pinned keys (else an *UpdateError). A *ConfigError when the config has no app_id.
func (c *Client) CheckUpdate(ctx context.Context, version, channel, platform, arch string) (*UpdateOffer, error) {
	if c.cfg.AppID == "" {
		return nil, configErr("app_id missing (release artifacts are signed for it)")
	}
	or := func(v, d string) string {
		if v == "" {
			return d
		}
		return v
	}
	s, e := c.requireSession()
	if e != nil {
		return nil, e
	}
	r, err := c.call(ctx, "releases/upgrade", map[string]any{
		"session": s, "version": version, "channel": or(channel, "stable"), "platform": or(platform, "any"), "arch": or(arch, "any"),
	})
	if err != nil {
		return nil, err
	}
	if r["upgrade"] == nil {
		return nil, nil
	}
	u, ok := r["upgrade"].(map[string]any)
	if !ok {
		return nil, verificationError(ReasonMalformed, "upgrade answer is not an object")
	}
	return parseOffer(u, c.cfg.AppID, c.keys)
}

// DownloadUpdate downloads a to targetPath: streamed into a temporary file in the same folder (progress,
// when not nil, after each chunk), checked for size, SHA-512 and signature, then renamed over the target.
// Any failure removes the temporary file, leaves the target untouched and returns an *UpdateError. The
// client's timeout bounds the connect and the answer's head; ctx bounds the whole download. Returns the
// target's absolute path.
func (c *Client) DownloadUpdate(ctx context.Context, a Artifact, targetPath string, progress func(received, total int64)) (string, error) {
	if ue := verifyArtifact(c.keys, &a); ue != nil {
		return "", ue
	}
	target, err := filepath.Abs(targetPath)
	if err != nil {
		return "", updateErr(CodeNetwork, UpdateDownloadFailed, "%v", err)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	tmp := filepath.Join(filepath.Dir(target), "."+filepath.Base(target)+"."+hex.EncodeToString(suffix)+".part")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", updateErr(CodeNetwork, UpdateDownloadFailed, "cannot create %s: %v", tmp, err)
	}
	if ue := c.stream(ctx, a, f, progress); ue != nil {
		f.Close()
		os.Remove(tmp)
		return "", ue
	}
	if err := os.Rename(tmp, target); err != nil {
		os.Remove(tmp)
		return "", updateErr(CodeNetwork, UpdateDownloadFailed, "moving into %s: %v", target, err)
	}
	return target, nil
}

// stream writes the verified download into f and closes it.
func (c *Client) stream(ctx context.Context, a Artifact, f *os.File, progress func(received, total int64)) *UpdateError {
	head, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := time.AfterFunc(c.timeout, cancel) // until the head arrives
	req, err := http.NewRequestWithContext(head, http.MethodGet, a.URL, nil)
	if err != nil || (req.URL.Scheme != "http" && req.URL.Scheme != "https") {
		return updateErr(CodeNetwork, UpdateDownloadFailed, "unsupported URL %q", a.URL)
	}
	res, err := c.http.Do(req)
	timedOut := !timer.Stop()
	if err != nil {
		if timedOut || errors.Is(err, context.DeadlineExceeded) {
			return updateErr(CodeTimeout, UpdateDownloadFailed, "GET %s: no answer within %s", a.Filename, c.timeout)
		}
		return updateErr(CodeNetwork, UpdateDownloadFailed, "GET %s: %v", a.Filename, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		var detail any = string(raw)
		var parsed map[string]any
		if json.Unmarshal(raw, &parsed) == nil && parsed["detail"] != nil {
			detail = parsed["detail"]
		}
		ue := updateErr(CodeServer, UpdateDownloadFailed, "%s: %d %s", a.Filename, res.StatusCode, strings.TrimSpace(string(raw)))
		ue.Status, ue.Detail = res.StatusCode, detail
		return ue
	}
	h := sha512.New()
	buf := make([]byte, 64*1024)
	var received int64
	for {
		n, rerr := res.Body.Read(buf)
		if n > 0 {
			received += int64(n)
			if received > a.Size {
				return updateErr(CodeVerification, UpdateSizeMismatch, "%s: more than the offered %d bytes", a.Filename, a.Size)
			}
			h.Write(buf[:n])
			if _, err := f.Write(buf[:n]); err != nil {
				return updateErr(CodeNetwork, UpdateDownloadFailed, "writing %s: %v", a.Filename, err)
			}
			if progress != nil {
				progress(received, a.Size)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return updateErr(CodeNetwork, UpdateDownloadFailed, "reading %s: %v", a.Filename, rerr)
		}
	}
	if err := f.Sync(); err != nil {
		return updateErr(CodeNetwork, UpdateDownloadFailed, "writing %s: %v", a.Filename, err)
	}
	if err := f.Close(); err != nil {
		return updateErr(CodeNetwork, UpdateDownloadFailed, "writing %s: %v", a.Filename, err)
	}
	if received != a.Size {
		return updateErr(CodeVerification, UpdateSizeMismatch, "%s: %d bytes, offered %d", a.Filename, received, a.Size)
	}
	if subtle.ConstantTimeCompare([]byte(hex.EncodeToString(h.Sum(nil))), []byte(strings.ToLower(a.Sha512))) != 1 {
		return updateErr(CodeVerification, UpdateSha512Mismatch, "%s: SHA-512 differs from the offer", a.Filename)
	}
	return nil
}
