package apiserver_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/webhook"
)

// waitEvent waits until the receiver got an event of type typ matching ok, checks its
// signature and returns its payload.
func waitEvent(t *testing.T, rc *receiver, key []byte, typ string, ok func(data map[string]any) bool) map[string]any {
	t.Helper()
	var found map[string]any
	require.Eventually(t, func() bool {
		for _, g := range rc.received() {
			var p map[string]any
			if json.Unmarshal(g.body, &p) != nil || p["type"] != typ {
				continue
			}
			if data, _ := p["data"].(map[string]any); ok == nil || ok(data) {
				require.NoError(t, webhook.Verify(key, g.header, g.body, time.Now(), 5*time.Minute), "signature of %s", typ)
				require.Equal(t, p["id"], g.header.Get("webhook-id"))
				found = p
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "no %s event arrived", typ)
	return found
}

// Access codes and gateway requests push their events to a real receiver: a code made and
// used, a request that could not reach its gateway, the gateway going offline and back.
func TestWebhookEventsFromAccessCodesAndGateways(t *testing.T) {
	t.Parallel()
	c := startCodeEnvWith(t, testenv.Options{WebhookSchedule: []time.Duration{200 * time.Millisecond}})
	rc := newReceiver(t)
	_, key := createEndpoint(t, c.Env, c.admin, rc.srv.URL, map[string]any{"event_types": []string{
		"access_code.created", "access_code.used", "access_code.removed", "gateway_request.failed", "gateway.offline", "gateway.online"}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("event log: %s", c.call(t, c.admin, http.MethodGet, "/webhooks/events?limit=100", nil).Body)
		}
	})

	code := c.create(t, "A03", false, time.Now().Add(time.Hour))
	id, digits := code["id"].(string), code["access_code"].(string)
	p := waitEvent(t, rc, key, "access_code.created", func(d map[string]any) bool { return d["id"] == id })
	d := p["data"].(map[string]any)
	assert.Equal(t, "****"+digits[4:], d["access_code"], "the code masked, never in clear")
	assert.Equal(t, "A03", d["locker_name"])
	assert.Equal(t, c.location, d["location_id"])
	assert.Equal(t, "active", d["status"])
	assert.EqualValues(t, c.Creds.OrganizationID, p["organization_id"])

	require.Equal(t, http.StatusOK, c.open(t, c.admin, digits).Status)
	p = waitEvent(t, rc, key, "access_code.used", func(d map[string]any) bool { return d["id"] == id })
	assert.NotEmpty(t, p["data"].(map[string]any)["used_at"])

	second := c.create(t, "A04", true, time.Now().Add(time.Hour))
	c.gw1.SetFaults(t, simctl.Faults{Mode: simctl.ModeUnreachable})
	r := c.open(t, c.admin, second["access_code"].(string))
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
	p = waitEvent(t, rc, key, "gateway_request.failed", func(d map[string]any) bool { return d["status"] == "dispatch_failed" })
	d = p["data"].(map[string]any)
	assert.Equal(t, "GW-0001", d["gatewayId"])
	assert.NotEmpty(t, d["id"])
	assert.NotEmpty(t, d["completedAt"])
	p = waitEvent(t, rc, key, "gateway.offline", func(d map[string]any) bool { return d["gatewayId"] == "GW-0001" })
	assert.Equal(t, false, p["data"].(map[string]any)["gatewayOnline"])

	c.gw1.SetFaults(t, simctl.Faults{Mode: simctl.ModeNone})
	p = waitEvent(t, rc, key, "gateway.online", func(d map[string]any) bool { return d["gatewayId"] == "GW-0001" })
	assert.Equal(t, true, p["data"].(map[string]any)["gatewayOnline"])

	r = c.call(t, c.admin, http.MethodPatch, "/locker/access-code/"+second["id"].(string), map[string]any{"status": "removed"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	waitEvent(t, rc, key, "access_code.removed", func(d map[string]any) bool { return d["id"] == second["id"] })

	// Each event reached the receiver once (no failures, so no retries): no duplicates.
	seen := map[string]int{}
	for _, g := range rc.received() {
		seen[g.header.Get("webhook-id")]++
	}
	for id, n := range seen {
		assert.Equal(t, 1, n, "event %s delivered %d times", id, n)
	}
	// Types the endpoint did not ask for are not delivered.
	for _, g := range rc.received() {
		var p map[string]any
		require.NoError(t, json.Unmarshal(g.body, &p))
		assert.NotEqual(t, "gateway_request.completed", p["type"])
	}
}
