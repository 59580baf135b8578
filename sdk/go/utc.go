package keywarden

import (
	"regexp"
	"strconv"
	"time"
)

// Strict ISO 8601 UTC times as docs/protocol.md 1 writes them (2026-11-21T22:00:00.000Z): date, T, time, an
// optional fraction of 1-9 digits (cut to milliseconds), Z; nothing else. The same rule in every SDK.
var isoPattern = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z$`)

// parseUTCms returns unix milliseconds of a strict ISO 8601 UTC string.
func parseUTCms(v any) (int64, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	m := isoPattern.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n := make([]int, 6)
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1])
	}
	if n[1] < 1 || n[1] > 12 || n[2] < 1 || n[3] > 23 || n[4] > 59 || n[5] > 59 {
		return 0, false
	}
	d := time.Date(n[0], time.Month(n[1]), n[2], n[3], n[4], n[5], 0, time.UTC)
	if d.Day() != n[2] { // 31 April, 29 February of a common year
		return 0, false
	}
	frac := m[7] + "000"
	ms, _ := strconv.Atoi(frac[:3])
	return d.Unix()*1000 + int64(ms), true
}

func timeFromMs(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// parseTime reads an answer's time leniently (RFC 3339), for expires_at of activation answers.
func parseTime(v any) *time.Time {
	if ms, ok := parseUTCms(v); ok {
		t := timeFromMs(ms)
		return &t
	}
	s, ok := v.(string)
	if !ok || s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil
	}
	t = t.UTC()
	return &t
}
