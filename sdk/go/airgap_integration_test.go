package keywarden

// Air-gapped machines against the real server and real relay processes prepared by
// test/helpers/airgap-harness.ts (KW_AIRGAP_*): an activation request answered through the dashboard
// route and completed, an answer to an older request refused, and a seat leased from a relay, renewed (by
// hand and by its own goroutine), released, refused when every seat is taken, and refused when the relay
// serves a pool signed by another key.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func needAirgap(t *testing.T) {
	t.Helper()
	needServer(t)
	if e := os.Getenv("KW_AIRGAP_ERROR"); e != "" {
		t.Fatalf("the harness could not prepare the relays: %s", e)
	}
	if os.Getenv("KW_AIRGAP_RELAY_URL") == "" {
		if os.Getenv("KW_REQUIRE_AIRGAP") == "1" {
			t.Fatal("KW_REQUIRE_AIRGAP=1 but the server has no offline-activations route")
		}
		t.Skip("air-gapped pending: the server has no /api/apps/{id}/offline-activations")
	}
}

var airgapKeys int32

func airgapKey(t *testing.T) string {
	keys := strings.Split(os.Getenv("KW_AIRGAP_KEYS"), ",")
	i := int(atomic.AddInt32(&airgapKeys, 1)) - 1
	if i >= len(keys) {
		t.Fatal("out of KW_AIRGAP_KEYS")
	}
	return keys[i]
}

func airgapClient(t *testing.T, opts ...Option) *Client {
	t.Helper()
	c, err := FromConfig(os.Getenv("KW_AIRGAP_CONFIG"), append([]Option{WithStateFile(filepath.Join(t.TempDir(), "state.json"))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// answer is the operator's side: the dashboard route answers the request.
func answer(t *testing.T, request string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"request": request})
	req, _ := http.NewRequest(http.MethodPost, os.Getenv("KW_BASE_URL")+"/api/apps/"+os.Getenv("KW_AIRGAP_APP_ID")+"/offline-activations", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+os.Getenv("KW_OWNER_TOKEN"))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Response string `json:"response"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != 200 {
		t.Fatalf("offline-activations answered %d (%v)", res.StatusCode, err)
	}
	return out.Response
}

func relayInUse(t *testing.T) int {
	res, err := http.Get(os.Getenv("KW_AIRGAP_RELAY_URL") + "/relay/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var s struct {
		InUse int `json:"in_use"`
	}
	_ = json.NewDecoder(res.Body).Decode(&s)
	return s.InUse
}

func TestAirgapRequestAnsweredThroughTheDashboardCompletes(t *testing.T) {
	needAirgap(t)
	c := airgapClient(t)
	const id = "go-airgap-machine-a"
	req := must(c.ActivationRequest(airgapKey(t), id, map[string]string{"cpu": "c1", "disk": "d1"}))
	if !strings.HasPrefix(req, "kwreq1.") {
		t.Fatal(req)
	}
	if _, err := os.Stat(c.RequestFile()); err != nil {
		t.Fatal("the nonce is not kept on disk:", err)
	}
	resp := answer(t, req)
	lic := must(c.CompleteActivation(resp, id))
	if lic.AppID != os.Getenv("KW_AIRGAP_APP_ID") || lic.HWID != id || lic.Level != 3 {
		t.Fatalf("%+v", lic)
	}
	later, err := FromConfig(os.Getenv("KW_AIRGAP_CONFIG"), WithStateFile(c.StateFile()))
	if err != nil {
		t.Fatal(err)
	}
	if must(later.LoadOffline(resp, id)).LicenseID != lic.LicenseID {
		t.Fatal("a later start does not load the answer")
	}
}

func TestAirgapAnAnswerToAnOlderRequestIsRefused(t *testing.T) {
	needAirgap(t)
	c := airgapClient(t)
	const id = "go-airgap-machine-b"
	key := airgapKey(t)
	old := answer(t, must(c.ActivationRequest(key, id, nil)))
	must(c.ActivationRequest(key, id, nil))
	_, err := c.CompleteActivation(old, id)
	if e := fails(t, err, CodeOfflineInvalid); e.Reason != OfflineWrongRequest {
		t.Fatalf("reason %s", e.Reason)
	}
	other := airgapClient(t)
	foreign := answer(t, must(other.ActivationRequest(airgapKey(t), "go-airgap-other", nil)))
	_, err = other.CompleteActivation(foreign, id)
	if e := fails(t, err, CodeOfflineInvalid); e.Reason != OfflineWrongHWID {
		t.Fatalf("reason %s", e.Reason)
	}
}

func TestAirgapASeatIsLeasedRenewedAndReleased(t *testing.T) {
	needAirgap(t)
	c := airgapClient(t)
	before := relayInUse(t)
	lease := must(c.LeaseSeat(context.Background(), os.Getenv("KW_AIRGAP_RELAY_URL"), "go-relay-a"))
	seats, _ := strconv.Atoi(os.Getenv("KW_AIRGAP_SEATS"))
	if !lease.Active() || lease.Pool().AppID != os.Getenv("KW_AIRGAP_APP_ID") || lease.Pool().Seats != int64(seats) {
		t.Fatalf("%+v", lease.Pool())
	}
	if relayInUse(t) != before+1 {
		t.Fatal("not in use at the relay")
	}
	first := lease.ExpiresAt()
	time.Sleep(1100 * time.Millisecond)
	if err := lease.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !lease.ExpiresAt().After(first) || lease.Renewals() != 1 {
		t.Fatal("not renewed")
	}
	lease.Release()
	if lease.Active() || relayInUse(t) != before {
		t.Fatal("not released")
	}
}

func TestAirgapTheLeaseRenewsItselfBeforeItExpires(t *testing.T) {
	needAirgap(t)
	// The client's clock runs 14 min 50 s ahead: the 15-minute lease has 10 s left, renewed at half that.
	c := airgapClient(t, WithClock(func() time.Time { return time.Now().Add(890 * time.Second) }))
	lease := must(c.LeaseSeat(context.Background(), os.Getenv("KW_AIRGAP_RELAY_URL"), "go-relay-b"))
	defer lease.Release()
	for i := 0; i < 300 && lease.Renewals() == 0; i++ {
		time.Sleep(200 * time.Millisecond)
	}
	if lease.Renewals() < 1 || lease.Lost() != nil {
		t.Fatalf("renewals %d, lost %v", lease.Renewals(), lease.Lost())
	}
}

func TestAirgapEverySeatTakenIsSessionLimitUntilOneIsReleased(t *testing.T) {
	needAirgap(t)
	c := airgapClient(t)
	url := os.Getenv("KW_AIRGAP_RELAY_URL")
	seats, _ := strconv.Atoi(os.Getenv("KW_AIRGAP_SEATS"))
	var held []*SeatLease
	defer func() {
		for _, l := range held {
			l.Release()
		}
	}()
	for i := 0; i < seats; i++ {
		held = append(held, must(c.LeaseSeat(context.Background(), url, "go-relay-seat-"+strconv.Itoa(i))))
	}
	_, err := c.LeaseSeat(context.Background(), url, "go-relay-one-too-many")
	if e := fails(t, err, CodeSessionLimit); e.Status != 409 || e.Detail != NoSeats {
		t.Fatalf("%+v", e)
	}
	held[len(held)-1].Release()
	held = append(held, must(c.LeaseSeat(context.Background(), url, "go-relay-one-too-many")))
}

func TestAirgapARelayServingAForgedPoolIsRefused(t *testing.T) {
	needAirgap(t)
	c := airgapClient(t)
	_, err := c.LeaseSeat(context.Background(), os.Getenv("KW_AIRGAP_FORGED_RELAY_URL"), "go-relay-forged")
	if e := fails(t, err, CodeOfflineInvalid); e.Reason != OfflineBadSignature {
		t.Fatalf("reason %s", e.Reason)
	}
	if len(c.Entitlements()) != 0 {
		t.Fatal("entitlements from a forged pool")
	}
}
