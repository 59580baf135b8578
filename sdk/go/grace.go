package keywarden

import (
	"sync"
	"time"
)

// The grace period (docs/protocol.md 12.6): how long the license stays valid while the service cannot be
// reached. Only verified answers move it: each verified answer of license, login, register, trial,
// heartbeat/start or an accepted beat sets it to its grace_until (an answer without one, or with one that
// is not a strict ISO 8601 UTC time, grants none); a verified refusal ends it at once.

// graceUntilOf returns the unix milliseconds an answer grants.
func graceUntilOf(answer map[string]any) (int64, bool) { return parseUTCms(answer["grace_until"]) }

// isRefusal: a verified answer that refuses: any 4xx but 429 (which says "not now", not "no").
func isRefusal(status int) bool { return status >= 400 && status < 500 && status != 429 }

type grace struct {
	mu    sync.Mutex
	until int64 // unix ms; 0: none
}

func (g *grace) note(answer map[string]any) {
	until, _ := graceUntilOf(answer)
	g.mu.Lock()
	g.until = until
	g.mu.Unlock()
}

func (g *grace) end() {
	g.mu.Lock()
	g.until = 0
	g.mu.Unlock()
}

func (g *grace) untilMs() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.until
}

func (g *grace) activeAt(now time.Time) bool {
	u := g.untilMs()
	return u != 0 && now.UnixMilli() < u
}
