package keywarden

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
)

// sdk/vectors/artifacts.json: every case downloaded for real (from an httptest server serving the case's
// bytes) through Client.DownloadUpdate, which must accept it or refuse it with the reason the case names,
// leaving nothing behind when it refuses; and the refusals of a link.
type artifactVectors struct {
	PinnedKeys []ResponseKey `json:"pinned_keys"`
	Reasons    []string      `json:"reasons"`
	Cases      []struct {
		Name     string `json:"name"`
		AppID    string `json:"app_id"`
		Version  string `json:"version"`
		Artifact struct {
			Filename  string `json:"filename"`
			Size      int64  `json:"size"`
			Sha512    string `json:"sha512"`
			Signature string `json:"signature"`
			Kid       string `json:"kid"`
		} `json:"artifact"`
		Downloaded string `json:"downloaded"`
		Valid      bool   `json:"valid"`
		Reason     string `json:"reason"`
	} `json:"cases"`
}

func listing(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func updateClient(t *testing.T, v *artifactVectors, appID, base string) *Client {
	c, err := New(&Config{Format: 1, BaseURL: base, APIKey: "k", AppID: appID, ResponseKeys: v.PinnedKeys})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestVectorsArtifacts(t *testing.T) {
	var v artifactVectors
	loadVectors(t, "artifacts.json", &v)
	files := map[string][]byte{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := files[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"detail":"Download link expired"}`))
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
	defer srv.Close()
	seen := map[string]bool{}
	for i, c := range v.Cases {
		bytes, _ := base64.StdEncoding.DecodeString(c.Downloaded)
		path := "/dl/" + strconv.Itoa(i)
		files[path] = bytes
		dir := t.TempDir()
		a := Artifact{AppID: c.AppID, Version: c.Version, Filename: c.Artifact.Filename, Platform: "any", Arch: "any",
			Size: c.Artifact.Size, Sha512: c.Artifact.Sha512, Signature: c.Artifact.Signature, Kid: c.Artifact.Kid, URL: srv.URL + path}
		target := filepath.Join(dir, a.Filename)
		var got, total int64
		written, err := updateClient(t, &v, c.AppID, srv.URL).DownloadUpdate(context.Background(), a, target, func(r, t int64) { got, total = r, t })
		if c.Valid {
			if err != nil || written != target {
				t.Fatalf("%s: %v", c.Name, err)
			}
			if data, _ := os.ReadFile(target); string(data) != string(bytes) {
				t.Fatalf("%s: bytes differ", c.Name)
			}
			if len(bytes) > 0 && (got != int64(len(bytes)) || total != int64(len(bytes))) {
				t.Fatalf("%s: progress %d/%d", c.Name, got, total)
			}
			continue
		}
		var ue *UpdateError
		if !errors.As(err, &ue) || ue.Reason != c.Reason || ue.Code != CodeVerification {
			t.Fatalf("%s: got %v, want %s", c.Name, err, c.Reason)
		}
		if l := listing(t, dir); len(l) != 0 {
			t.Fatalf("%s: left behind %v", c.Name, l)
		}
		seen[ue.Reason] = true
	}
	for _, r := range v.Reasons {
		if !seen[r] {
			t.Errorf("reason %s never seen", r)
		}
	}
	// A refused link: download_failed with the answer's status and detail; the running version is kept.
	dir := t.TempDir()
	target := filepath.Join(dir, "app.bin")
	os.WriteFile(target, []byte("the running version"), 0o644)
	c := v.Cases[0]
	a := Artifact{AppID: c.AppID, Version: c.Version, Filename: c.Artifact.Filename, Size: c.Artifact.Size,
		Sha512: c.Artifact.Sha512, Signature: c.Artifact.Signature, Kid: c.Artifact.Kid, URL: srv.URL + "/gone"}
	_, err := updateClient(t, &v, c.AppID, srv.URL).DownloadUpdate(context.Background(), a, target, nil)
	var ue *UpdateError
	if !errors.As(err, &ue) || ue.Reason != UpdateDownloadFailed || ue.Code != CodeServer || ue.Status != 403 || ue.Detail != "Download link expired" {
		t.Fatalf("refused link: %#v", err)
	}
	var base *Error
	if !errors.As(err, &base) || base.Code != CodeServer {
		t.Fatalf("an UpdateError is also an *Error: %#v", err)
	}
	if data, _ := os.ReadFile(target); string(data) != "the running version" || len(listing(t, dir)) != 1 {
		t.Fatal("the target was touched")
	}
}
