package gatewayalerts_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/gatewayalerts"
	"github.com/lockernet/lockernet/internal/webhook"
)

// events is a verifying receiver's log of the events it was handed (once per event id).
type events struct {
	mu         sync.Mutex
	got        []webhook.Payload
	duplicates int
	refused    []string
	srv        *httptest.Server
	rc         *webhook.Receiver
}

func newEvents(t *testing.T) *events {
	ev := &events{}
	ev.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev.mu.Lock()
		rc := ev.rc
		ev.mu.Unlock()
		if rc == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rc.ServeHTTP(w, r)
	}))
	t.Cleanup(ev.srv.Close)
	return ev
}

func (ev *events) listen(key []byte) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.rc = &webhook.Receiver{Key: key,
		Event: func(p webhook.Payload) {
			ev.mu.Lock()
			defer ev.mu.Unlock()
			ev.got = append(ev.got, p)
		},
		Duplicate: func(string) {
			ev.mu.Lock()
			defer ev.mu.Unlock()
			ev.duplicates++
		},
		Refused: func(reason string) {
			ev.mu.Lock()
			defer ev.mu.Unlock()
			ev.refused = append(ev.refused, reason)
		},
	}
}

func (ev *events) ofType(typ string) []webhook.Payload {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []webhook.Payload
	for _, p := range ev.got {
		if p.Type == typ {
			out = append(out, p)
		}
	}
	return out
}

func (ev *events) all() []webhook.Payload {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]webhook.Payload(nil), ev.got...)
}

var alertTypes = []string{"locker.door_ajar", "locker.forced_open", "locker.item_left", "gateway.controller_offline", "gateway.controller_online"}

func createEndpoint(t *testing.T, e *testenv.Env, key, url string) []byte {
	t.Helper()
	r := testenv.DoWithHeaders(t, http.MethodPost, e.URL+"/webhooks/endpoints", map[string]string{"x-api-key": key},
		map[string]any{"url": url, "event_types": alertTypes})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	secret, _ := r.Map(t)["secret"].(string)
	k, err := webhook.ParseSecret(secret)
	require.NoError(t, err)
	return k
}

func data(t *testing.T, p webhook.Payload) map[string]any {
	t.Helper()
	var d map[string]any
	require.NoError(t, json.Unmarshal(p.Data, &d))
	return d
}

// waitFor waits (at most 30 s) until the receiver holds an event of typ matching ok.
func waitFor(t *testing.T, ev *events, typ string, ok func(d map[string]any) bool) map[string]any {
	t.Helper()
	var found map[string]any
	require.Eventually(t, func() bool {
		for _, p := range ev.ofType(typ) {
			if d := data(t, p); ok(d) {
				found = d
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "no %s event arrived; got %+v", typ, ev.all())
	return found
}

// TestGatewayAlertsToWebhooks runs a real gateway with a simulated controller and its watch,
// registered with the cloud, and two workers' alert loops sharing it: each alert the
// simulator provokes — a door forced, left ajar, an item left after a pickup, a controller
// going offline and back — reaches the organization's webhook receiver as its event exactly
// once, with the gateway, location, locker and time; the forced locker is out of service in
// the cloud's locker mirror; another organization's endpoint gets nothing.
func TestGatewayAlertsToWebhooks(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{Cloud: testenv.ScaledCloudSettings()})
	loc := e.Seed.GatewayLocationID["GW-0001"]
	g := gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetTwoBanks, GatewayID: "GW-0001",
		Watch: gateway.WatchConfig{Interval: 20 * time.Millisecond, DoorAjarAfter: 1500 * time.Millisecond, OfflineAfter: 3}})
	gw := e.RegisterGateway(t, g, "GW-0001", loc)
	e.StartGatewaySync(t, 200*time.Millisecond)
	e.WaitLockersMirrored(t, gw, 16)

	mine, theirs := newEvents(t), newEvents(t)
	mine.listen(createEndpoint(t, e, e.Creds.AppEngineAPIKey, mine.srv.URL))
	other := e.NewOtherOrg(t)
	theirs.listen(createEndpoint(t, e, testenv.NewAppKey(t, e, other.OrgID), theirs.srv.URL))

	// Two workers poll; the leases let one at a time hold the gateway's long poll.
	reg := prometheus.NewRegistry()
	metrics := gatewayalerts.NewMetrics(reg)
	e.StartGatewayAlerts(t, "worker-a", 2*time.Second, metrics)
	e.StartGatewayAlerts(t, "worker-b", 2*time.Second, metrics)

	// A door forced open: the event, and the locker out of service in the mirror.
	require.True(t, g.Sim.ForceOpen(110))
	d := waitFor(t, mine, "locker.forced_open", func(d map[string]any) bool { return d["lockerId"] == float64(110) })
	assert.Equal(t, "GW-0001", d["gatewayId"])
	assert.EqualValues(t, loc, d["locationId"])
	assert.Equal(t, "B02", d["lockerName"])
	assert.Equal(t, "forced_open", d["kind"])
	assert.Equal(t, true, d["outOfService"])
	assert.Equal(t, "FORCED_OPEN", d["reasonCode"])
	alertedAt, err := time.Parse(time.RFC3339Nano, d["alertedAt"].(string))
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), alertedAt, time.Minute)
	mirror, err := e.Store.GatewayLockers(context.Background(), gw.DBID)
	require.NoError(t, err)
	for _, l := range mirror {
		assert.Equal(t, l.LockerID == 110, l.OutOfService, "locker %d out of service in the mirror", l.LockerID)
	}

	// Left open: ajar.
	d = waitFor(t, mine, "locker.door_ajar", func(d map[string]any) bool { return d["lockerId"] == float64(110) })
	assert.Equal(t, "B02", d["lockerName"])
	require.True(t, g.Sim.CloseDoor(110, false))

	// A pickup that leaves the item: the gateway's own open, the door shut over the item, the
	// transaction released.
	do := func(method, path string) []byte {
		t.Helper()
		resp, body, err := g.Do(context.Background(), method, path, map[string]any{"transactionId": "pickup-1"})
		require.NoError(t, err)
		require.Less(t, resp.StatusCode, 300, "%s %s: %s", method, path, body)
		return body
	}
	created := do(http.MethodPost, "/transactions")
	var tx struct {
		LockerID int `json:"lockerId"`
	}
	require.NoError(t, json.Unmarshal(created, &tx))
	lockerID := tx.LockerID
	do(http.MethodPost, "/transactions/pickup-1/open")
	require.True(t, g.Sim.CloseDoor(lockerID, true))
	do(http.MethodDelete, "/transactions/pickup-1")
	d = waitFor(t, mine, "locker.item_left", func(d map[string]any) bool { return d["lockerId"] == float64(lockerID) })
	assert.Equal(t, "pickup-1", d["transactionId"])
	assert.EqualValues(t, loc, d["locationId"])

	// A controller that stops answering, and comes back.
	g.SetFaults(t, simctl.Faults{Mode: simctl.ModeControllerUnreachable, ControllerID: "CTL-1"})
	d = waitFor(t, mine, "gateway.controller_offline", func(d map[string]any) bool { return d["controllerId"] == "CTL-1" })
	assert.Equal(t, "GW-0001", d["gatewayId"])
	assert.Nil(t, d["lockerId"])
	g.SetFaults(t, simctl.Faults{Mode: simctl.ModeNone})
	waitFor(t, mine, "gateway.controller_online", func(d map[string]any) bool { return d["controllerId"] == "CTL-1" })

	// Exactly once each: one event per alert seq, never handed on twice. A second door
	// episode was not started, so one forced_open and one door_ajar.
	time.Sleep(time.Second) // any second recording by the other worker would have arrived
	seqs := map[float64]int{}
	for _, p := range mine.all() {
		seqs[data(t, p)["seq"].(float64)]++
	}
	for seq, n := range seqs {
		assert.Equal(t, 1, n, "alert %v recorded once", seq)
	}
	assert.Len(t, seqs, 5, "five alerts: %+v", mine.all())
	for _, typ := range alertTypes {
		assert.Len(t, mine.ofType(typ), 1, typ)
	}
	mine.mu.Lock()
	assert.Zero(t, mine.duplicates)
	assert.Empty(t, mine.refused)
	mine.mu.Unlock()

	// Counted once each, by kind and location.
	families, err := reg.Gather()
	require.NoError(t, err)
	counted := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			assert.Equal(t, strconv.FormatInt(loc, 10), labels["location"])
			counted[labels["kind"]] += m.GetCounter().GetValue()
		}
	}
	assert.Equal(t, map[string]float64{"door_ajar": 1, "forced_open": 1, "item_left": 1, "controller_offline": 1, "controller_online": 1}, counted)

	// The other organization's endpoint got none of it.
	assert.Empty(t, theirs.all())
	var n int
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM webhook_events WHERE type LIKE ANY ($1) AND organization_id = $2`,
		[]string{"locker.%", "gateway.controller%"}, other.OrgID).Scan(&n))
	assert.Zero(t, n)
	var last int64
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(),
		`SELECT last_seq FROM gateway_alert_cursors WHERE gateway_id = $1`, gw.DBID).Scan(&last))
	assert.EqualValues(t, 5, last, "the cursor is at the last alert")
	assert.True(t, strings.HasPrefix(mine.srv.URL, "http://127.0.0.1"))
}
