package keywarden

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// sdk/vectors/airgap.json: activation requests this SDK writes, answers accepted only for the latest
// request's nonce, and seat pools accepted or refused for the reason each case names.

type airgapVectors struct {
	PinnedKeys []ResponseKey `json:"pinned_keys"`
	Requests   struct {
		Cases []map[string]any `json:"cases"`
	} `json:"requests"`
	Responses struct {
		Reasons []string `json:"reasons"`
		Cases   []struct {
			Name     string   `json:"name"`
			File     string   `json:"file"`
			Now      float64  `json:"now"`
			LastSeen *float64 `json:"last_seen"`
			AppID    string   `json:"app_id"`
			HWID     string   `json:"hwid"`
			Nonce    *string  `json:"nonce"`
			Valid    bool     `json:"valid"`
			Reason   string   `json:"reason"`
		} `json:"cases"`
	} `json:"responses"`
	Pools struct {
		Reasons []string `json:"reasons"`
		Cases   []struct {
			Name    string         `json:"name"`
			Pool    string         `json:"pool"`
			Now     float64        `json:"now"`
			AppID   string         `json:"app_id"`
			Valid   bool           `json:"valid"`
			Reason  string         `json:"reason"`
			Payload map[string]any `json:"payload"`
		} `json:"cases"`
	} `json:"pools"`
}

func decodeRequest(t *testing.T, r string) map[string]any {
	if !strings.HasPrefix(r, "kwreq1.") || strings.Contains(r, "=") {
		t.Fatalf("not kwreq1. without padding: %s", r)
	}
	raw, err := base64.RawURLEncoding.DecodeString(r[7:])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func sortedReasons(seen map[string]bool) []string {
	out := []string{}
	for r := range seen {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

func TestVectorsAirgap(t *testing.T) {
	var v airgapVectors
	loadVectors(t, "airgap.json", &v)
	keys := mustPin(t, v.PinnedKeys)
	for _, c := range v.Requests.Cases {
		var comps map[string]string
		if m, ok := c["components"].(map[string]any); ok {
			comps = map[string]string{}
			for k, x := range m {
				comps[k] = x.(string)
			}
		}
		mine := BuildActivationRequest(c["app_id"].(string), c["key"].(string), c["hwid"].(string), c["nonce"].(string), c["created_at"].(string), comps)
		if !reflect.DeepEqual(decodeRequest(t, mine), decodeRequest(t, c["request"].(string))) {
			t.Errorf("%s: %s", c["name"], mine)
		}
	}
	seen := map[string]bool{}
	for _, c := range v.Responses.Cases {
		_, err := verifyLicenseFile(c.File, keys, c.AppID, c.HWID, c.Now, c.LastSeen)
		if err == nil {
			err = checkRequestNonce(c.File, c.Nonce)
		}
		if c.Valid != (err == nil) || (err != nil && (err.Code != CodeOfflineInvalid || err.Reason != c.Reason)) {
			t.Errorf("%s: want valid=%v %s, got %v", c.Name, c.Valid, c.Reason, err)
		}
		if err != nil {
			seen[err.Reason] = true
		}
	}
	want := append([]string{}, v.Responses.Reasons...)
	sort.Strings(want)
	if !reflect.DeepEqual(sortedReasons(seen), want) {
		t.Errorf("answer reasons %v", sortedReasons(seen))
	}
	seen = map[string]bool{}
	for _, c := range v.Pools.Cases {
		pool, err := verifyPool(c.Pool, keys, c.AppID, c.Now)
		if !c.Valid {
			if err == nil || err.Code != CodeOfflineInvalid || err.Reason != c.Reason {
				t.Errorf("%s: want %s, got %v", c.Name, c.Reason, err)
			} else {
				seen[err.Reason] = true
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: refused: %v", c.Name, err)
			continue
		}
		seats, _ := jsonInt(c.Payload["seats"])
		ents, _ := entitlementsOf(c.Payload)
		if pool.LicenseID != c.Payload["license_id"] || pool.RelayID != c.Payload["relay_id"] || pool.Seats != seats ||
			!reflect.DeepEqual(pool.Entitlements, ents) || (pool.ExpiresAt == nil) != (c.Payload["expires_at"] == nil) {
			t.Errorf("%s: %+v", c.Name, pool)
		}
	}
	want = append([]string{}, v.Pools.Reasons...)
	sort.Strings(want)
	if !reflect.DeepEqual(sortedReasons(seen), want) {
		t.Errorf("pool reasons %v", sortedReasons(seen))
	}
}
