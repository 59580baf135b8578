package keywarden

// The route hint (X-Keywarden-Route) against a scripted fake: sent back on every call until an answer
// is 502/503/504 (signed or not) or the call fails on the way (a timeout, a dropped connection); the
// call after that carries none, so a balancer routing on it picks any live worker.

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type routeStep struct {
	kind   string // "answer", "unsigned" (a balancer's own 502), "hang" (until the client gives up), "reset"
	status int
	route  string
}

func TestRouteIsDroppedAfterAGatewayStatusATimeoutOrAConnectionError(t *testing.T) {
	f := newFake(t)
	steps := []routeStep{
		{"answer", 200, "a-0"}, // init: the answer names the owner
		{"answer", 503, "a-0"}, // a signed 503: dropped, even though it names one
		{"answer", 401, "b-1"},
		{"unsigned", 502, ""},
		{"answer", 401, "b-1"},
		{"answer", 504, "b-1"},
		{"answer", 401, "b-0"},
		{"hang", 0, ""},
		{"answer", 401, "b-1"},
		{"reset", 0, ""}, // the connection drops after the request left
		{"answer", 401, "b-0"},
		{"answer", 401, ""},
	}
	var mu sync.Mutex
	var sent []string
	f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		mu.Lock()
		sent = append(sent, r.Header.Get("X-Keywarden-Route"))
		step := steps[0]
		steps = steps[1:]
		mu.Unlock()
		switch step.kind {
		case "unsigned":
			w.WriteHeader(step.status)
			return
		case "hang":
			<-r.Context().Done() // the client's timeout ends the request
			return
		case "reset":
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		answer := map[string]any{"detail": "x"}
		if step.status == 200 {
			answer = map[string]any{"success": true, "session": strings.Repeat("s", 43), "app": map[string]any{"name": "Fake", "version": "1.0"}}
		}
		out, _ := json.Marshal(answer)
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		msg := ResponseMessage("k1", r.Method, r.URL.Path, step.status, ts, r.Header.Get("X-Nonce"), out)
		w.Header().Set("X-Response-Kid", "k1")
		w.Header().Set("X-Response-Timestamp", ts)
		w.Header().Set("X-Response-Signature", base64.StdEncoding.EncodeToString(ed25519.Sign(f.priv, []byte(msg))))
		if step.route != "" {
			w.Header().Set("X-Keywarden-Route", step.route)
		}
		w.WriteHeader(step.status)
		_, _ = w.Write(out)
	})
	c := f.client(t, WithRetries(0), WithTimeout(300*time.Millisecond))
	must(c.Init(ctx))
	for {
		mu.Lock()
		left := len(steps)
		mu.Unlock()
		if left == 0 {
			break
		}
		if _, err := c.ActivateLicense(ctx, "KEY", "hwid"); err == nil {
			t.Fatal("a refused activation returned no error")
		}
	}
	want := []string{"", "a-0", "", "b-1", "", "b-1", "", "b-0", "", "b-1", "", "b-0"}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(sent, want) {
		t.Fatalf("routes sent: %q, want %q", sent, want)
	}
}
