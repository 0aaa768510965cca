package gateway_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/gateway/gwapi"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong/kerongemu/emutest"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
)

// testWatch reads the doors every 20 ms; a door is ajar after 400 ms; a controller is
// offline after 3 failed reads.
var testWatch = gateway.WatchConfig{Interval: 20 * time.Millisecond, DoorAjarAfter: 400 * time.Millisecond, OfflineAfter: 3}

// alertsFrom reads GET /alerts?after= with a long poll until it has n alerts (each call
// waits at most 5 s; the whole at most 20 s).
func alertsFrom(t *testing.T, get func(path string) (int, []byte), after int64, n int) []gateway.Alert {
	t.Helper()
	var out []gateway.Alert
	deadline := time.Now().Add(20 * time.Second)
	for len(out) < n {
		require.True(t, time.Now().Before(deadline), "got %d alerts of %d: %+v", len(out), n, out)
		status, body := get("/alerts?wait=5&after=" + strconv.FormatInt(after, 10))
		require.Equal(t, http.StatusOK, status, "%s", body)
		list := decode[gateway.AlertList](t, reply{status: status, body: body})
		out = append(out, list.Alerts...)
		if len(list.Alerts) > 0 {
			assert.Equal(t, list.Alerts[len(list.Alerts)-1].Seq, list.Next)
		} else {
			assert.Equal(t, after, list.Next, "no alert: next is after")
		}
		after = list.Next
	}
	return out
}

// alertOf reads GET /alerts after seq until an alert of kind comes, and returns it (others
// before it are passed over: a door open for a while on a loaded machine may go ajar).
func alertOf(t *testing.T, get func(path string) (int, []byte), after int64, kind string) gateway.Alert {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, a := range alertsFrom(t, get, after, 1) {
			if a.Kind == kind {
				return a
			}
			after = a.Seq
		}
		require.True(t, time.Now().Before(deadline), "no %s alert", kind)
	}
}

// noAlertAfter asserts that no alert comes after seq within a long poll of wait seconds.
func noAlertAfter(t *testing.T, get func(path string) (int, []byte), seq int64, wait int) {
	t.Helper()
	status, body := get("/alerts?after=" + strconv.FormatInt(seq, 10) + "&wait=" + strconv.Itoa(wait))
	require.Equal(t, http.StatusOK, status, "%s", body)
	list := decode[gateway.AlertList](t, reply{status: status, body: body})
	assert.Empty(t, list.Alerts, "one alert per episode")
	assert.Equal(t, seq, list.Next)
}

func simGateway(t *testing.T, watch gateway.WatchConfig) (*gatewaytest.Gateway, func(path string) (int, []byte)) {
	t.Helper()
	gw := gatewaytest.Start(t, gatewaytest.Options{Watch: watch})
	return gw, func(path string) (int, []byte) {
		r := call(t, gw, http.MethodGet, path, nil)
		return r.status, r.body
	}
}

func simPost(t *testing.T, gw *gatewaytest.Gateway, path string, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, gw.SimURL+path, bytes.NewBufferString(body))
	require.NoError(t, err)
	r := send(t, req)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
}

func requireLockerAlert(t *testing.T, a gateway.Alert, kind string, lockerID int, name, controllerID string, bankID int) {
	t.Helper()
	assert.Equal(t, kind, a.Kind)
	assert.Equal(t, "GW-0001", a.GatewayID)
	require.NotNil(t, a.LockerID, "%+v", a)
	assert.Equal(t, lockerID, *a.LockerID)
	require.NotNil(t, a.LockerName)
	assert.Equal(t, name, *a.LockerName)
	assert.Equal(t, controllerID, a.ControllerID)
	assert.Equal(t, bankID, a.BankID)
	assert.Regexp(t, timestampPattern, a.At)
	assert.NotEmpty(t, a.Message)
}

// TestWatchForcedOpen: a door opened by hand (the simulator's force-open) raises one
// forced_open alert and takes the locker out of service with reason code FORCED_OPEN; left
// open it then raises one door_ajar, and nothing more while it stays open. A door the
// gateway opened raises no forced_open.
func TestWatchForcedOpen(t *testing.T) {
	t.Parallel()
	gw, get := simGateway(t, testWatch)

	simPost(t, gw, "/sim/lockers/110/force-open", "")
	alerts := alertsFrom(t, get, 0, 2)
	require.Len(t, alerts, 2)
	requireLockerAlert(t, alerts[0], gwapi.AlertForcedOpen, 110, "B02", "CTL-2", 2)
	requireLockerAlert(t, alerts[1], gwapi.AlertDoorAjar, 110, "B02", "CTL-2", 2)
	assert.Less(t, alerts[0].Seq, alerts[1].Seq)

	lk := decode[gateway.Locker](t, call(t, gw, http.MethodGet, "/lockers/110", nil))
	assert.True(t, lk.OutOfService)
	require.NotNil(t, lk.ReasonCode)
	assert.Equal(t, "FORCED_OPEN", *lk.ReasonCode)
	assert.False(t, lk.Available)
	// An open by transaction is refused now.
	noAlertAfter(t, get, alerts[1].Seq, 1)

	// The gateway's own open: no forced_open; left open, one door_ajar.
	r := call(t, gw, http.MethodPost, "/lockers/101/open", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	more := alertsFrom(t, get, alerts[1].Seq, 1)
	require.Len(t, more, 1)
	requireLockerAlert(t, more[0], gwapi.AlertDoorAjar, 101, "A01", "CTL-1", 1)
	assert.False(t, decode[gateway.Locker](t, call(t, gw, http.MethodGet, "/lockers/101", nil)).OutOfService)

	// Shut and forced again: a new episode, a new alert.
	simPost(t, gw, "/sim/lockers/110/close", `{"itemInside": false}`)
	time.Sleep(100 * time.Millisecond) // a few reads see it shut
	simPost(t, gw, "/sim/lockers/110/force-open", "")
	again := alertsFrom(t, get, more[0].Seq, 1)
	requireLockerAlert(t, again[0], gwapi.AlertForcedOpen, 110, "B02", "CTL-2", 2)

	// Every door shut: no alert comes any more (the reads after the close have seen it).
	simPost(t, gw, "/sim/lockers/110/close", `{"itemInside": false}`)
	simPost(t, gw, "/sim/lockers/101/close", `{"itemInside": false}`)
	time.Sleep(200 * time.Millisecond)
	all := decode[gateway.AlertList](t, call(t, gw, http.MethodGet, "/alerts?limit=1000", nil)).Alerts
	kinds := map[string]int{}
	for _, a := range all {
		kinds[a.Kind]++
	}
	assert.Equal(t, 2, kinds[gwapi.AlertForcedOpen])
	// The second forced episode may have gone ajar too before its door was shut.
	assert.Contains(t, []int{2, 3}, kinds[gwapi.AlertDoorAjar])

	// The event log has them, and the metric counts them.
	logs := decode[[]gateway.LogEntry](t, call(t, gw, http.MethodGet, "/system/logs?limit=1000", nil))
	forced := 0
	for _, e := range logs {
		if e.Fields["alert"] == gwapi.AlertForcedOpen {
			forced++
			assert.Equal(t, "warn", e.Level)
			assert.EqualValues(t, 110, e.Fields["lockerId"])
		}
	}
	assert.Equal(t, 2, forced)
	metrics := call(t, gw, http.MethodGet, "/metrics", nil)
	assert.Contains(t, string(metrics.body), `gateway_alerts_total{kind="forced_open"} 2`)
	assert.Contains(t, string(metrics.body), `gateway_alerts_total{kind="door_ajar"} `+strconv.Itoa(kinds[gwapi.AlertDoorAjar]))
}

// TestWatchItemLeft: a transaction opened and released is a pickup; its door read shut with
// the presence sensor on raises item_left (with the transaction), shut and empty raises
// nothing, and a door still open waits for it to shut.
func TestWatchItemLeft(t *testing.T) {
	t.Parallel()
	// No door_ajar here: a door open between two requests of a loaded machine is not ajar.
	watch := testWatch
	watch.DoorAjarAfter = time.Hour
	gw, get := simGateway(t, watch)

	pickup := func(txID string, itemInside, closeBeforeRelease bool) int {
		t.Helper()
		tx := createTransaction(t, gw, map[string]any{"transactionId": txID})
		r := call(t, gw, http.MethodPost, "/transactions/"+txID+"/open", nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		closeDoor := func() {
			simPost(t, gw, "/sim/lockers/"+strconv.Itoa(tx.LockerID)+"/close", `{"itemInside": `+strconv.FormatBool(itemInside)+`}`)
		}
		if closeBeforeRelease {
			closeDoor()
		}
		r = call(t, gw, http.MethodDelete, "/transactions/"+txID, nil)
		require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
		if !closeBeforeRelease {
			time.Sleep(100 * time.Millisecond) // read open after the release
			closeDoor()
		}
		return tx.LockerID
	}

	empty := pickup("tx-empty", false, true)
	left := pickup("tx-left", true, true)
	alerts := alertsFrom(t, get, 0, 1)
	require.Len(t, alerts, 1)
	assert.Equal(t, gwapi.AlertItemLeft, alerts[0].Kind)
	require.NotNil(t, alerts[0].LockerID)
	assert.Equal(t, left, *alerts[0].LockerID)
	assert.Equal(t, empty, left, "the first pickup freed the locker the second took")
	require.NotNil(t, alerts[0].TransactionID)
	assert.Equal(t, "tx-left", *alerts[0].TransactionID)

	// Released with the door still open: the alert comes once it shuts.
	late := pickup("tx-late", true, false)
	more := alertsFrom(t, get, alerts[0].Seq, 1)
	require.Len(t, more, 1)
	assert.Equal(t, gwapi.AlertItemLeft, more[0].Kind)
	assert.Equal(t, late, *more[0].LockerID)
	assert.Equal(t, "tx-late", *more[0].TransactionID)
	// Once per release: the item still inside raises nothing more.
	noAlertAfter(t, get, more[0].Seq, 1)

	// A transaction never opened is no pickup: released over an item, nothing.
	tx := createTransaction(t, gw, map[string]any{"transactionId": "tx-unopened"})
	require.True(t, gw.Sim.CloseDoor(tx.LockerID, true))
	r := call(t, gw, http.MethodDelete, "/transactions/tx-unopened", nil)
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	noAlertAfter(t, get, more[0].Seq, 1)

	// Released with the door open, then opened again by the gateway (a new use) before it
	// shut: the pickup is over, and an item put in then is no item left.
	tx = createTransaction(t, gw, map[string]any{"transactionId": "tx-reused"})
	r = call(t, gw, http.MethodPost, "/transactions/tx-reused/open", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = call(t, gw, http.MethodDelete, "/transactions/tx-reused", nil)
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	r = call(t, gw, http.MethodPost, "/lockers/"+strconv.Itoa(tx.LockerID)+"/open", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.True(t, gw.Sim.CloseDoor(tx.LockerID, true))
	noAlertAfter(t, get, more[0].Seq, 1)
}

// TestWatchControllerOffline: a controller that stops answering raises one
// controller_offline (the other controller, answering, none), and one controller_online
// when it answers again.
func TestWatchControllerOffline(t *testing.T) {
	t.Parallel()
	gw, get := simGateway(t, testWatch)
	gw.SetFaults(t, simctl.Faults{Mode: simctl.ModeControllerUnreachable, ControllerID: "CTL-2"})
	alerts := alertsFrom(t, get, 0, 1)
	require.Len(t, alerts, 1)
	a := alerts[0]
	assert.Equal(t, gwapi.AlertControllerOffline, a.Kind)
	assert.Equal(t, "CTL-2", a.ControllerID)
	assert.Equal(t, 2, a.BankID)
	assert.Nil(t, a.LockerID)
	assert.Nil(t, a.LockerName)
	noAlertAfter(t, get, a.Seq, 1)

	gw.SetFaults(t, simctl.Faults{Mode: simctl.ModeNone})
	back := alertsFrom(t, get, a.Seq, 1)
	require.Len(t, back, 1)
	assert.Equal(t, gwapi.AlertControllerOnline, back[0].Kind)
	assert.Equal(t, "CTL-2", back[0].ControllerID)
	assert.Greater(t, back[0].Seq, a.Seq)
}

// TestAlertsLongPoll: GET /alerts answers at once when alerts after the cursor exist, waits
// for the next one when none does, answers an empty list after wait, and refuses bad
// parameters with the Error body.
func TestAlertsLongPoll(t *testing.T) {
	t.Parallel()
	gw, get := simGateway(t, testWatch)

	// Nothing yet: wait=0 answers at once, empty.
	status, body := get("/alerts")
	require.Equal(t, http.StatusOK, status, "%s", body)
	list := decode[gateway.AlertList](t, reply{status: status, body: body})
	assert.Empty(t, list.Alerts)
	assert.NotNil(t, list.Alerts, "an empty array, not null")
	assert.Equal(t, int64(0), list.Next)

	// Empty after wait.
	start := time.Now()
	noAlertAfter(t, get, 0, 1)
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "the poll waited")

	// A poll in flight gets the alert raised while it waits.
	got := make(chan gateway.AlertList, 1)
	go func() {
		resp, data, err := gw.Do(context.WithoutCancel(t.Context()), http.MethodGet, "/alerts?after=0&wait=20", nil)
		if err == nil && resp.StatusCode == http.StatusOK {
			got <- decode[gateway.AlertList](t, reply{status: resp.StatusCode, body: data})
		}
		close(got)
	}()
	time.Sleep(200 * time.Millisecond)
	require.True(t, gw.Sim.ForceOpen(103))
	woke, ok := <-got
	require.True(t, ok, "the long poll answered")
	require.NotEmpty(t, woke.Alerts)
	assert.Equal(t, gwapi.AlertForcedOpen, woke.Alerts[0].Kind)

	// Alerts exist: answered at once, whatever wait says; limit and after page them.
	alertsFrom(t, get, 0, 2) // forced_open, door_ajar
	status, body = get("/alerts?after=0&limit=1&wait=25")
	require.Equal(t, http.StatusOK, status, "%s", body)
	first := decode[gateway.AlertList](t, reply{status: status, body: body})
	require.Len(t, first.Alerts, 1)
	assert.Equal(t, first.Alerts[0].Seq, first.Next)
	status, body = get("/alerts?limit=1&after=" + strconv.FormatInt(first.Next, 10))
	require.Equal(t, http.StatusOK, status, "%s", body)
	second := decode[gateway.AlertList](t, reply{status: status, body: body})
	require.Len(t, second.Alerts, 1)
	assert.Equal(t, gwapi.AlertDoorAjar, second.Alerts[0].Kind)

	for _, tc := range []struct{ query, field string }{
		{"after=-1", "after"}, {"after=x", "after"}, {"limit=0", "limit"}, {"limit=1001", "limit"},
		{"wait=26", "wait"}, {"wait=-1", "wait"}, {"wait=1.5", "wait"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			e := requireError(t, call(t, gw, http.MethodGet, "/alerts?"+tc.query, nil), http.StatusUnprocessableEntity, "VALIDATION_ERROR")
			assert.Equal(t, tc.field, e.Details["field"])
		})
	}
	r := callWithSecret(t, gw, "wrong-secret", http.MethodGet, "/alerts", nil)
	requireError(t, r, http.StatusUnauthorized, "GATEWAY_AUTH_FAILED")
}

// TestWatchOnKerongBoard drives the watch through the Kerong driver over a pseudo-terminal
// to the byte-level emulator: a door opened by hand is forced_open (out of service), a
// door left open door_ajar, a board that falls silent controller_offline and, back,
// controller_online, and an item left after a pickup item_left.
func TestWatchOnKerongBoard(t *testing.T) {
	t.Parallel()
	emu, pt := emutest.ServePTY(t, kerongemu.Config{Boards: []int{1}})
	layout, err := gateway.Preset(gateway.PresetOneBank)
	require.NoError(t, err)
	ctlURL := "kerong+serial://" + pt.Path + "?board=1&timeout=100ms&opentimeout=300ms&rereads=1"
	layout.Banks[0].Controller = gateway.ControllerSpec{ID: "CTL-1", Kind: kerong.Kind, Address: ctlURL}
	ctl, err := emutest.Buses(t).Controller("CTL-1", ctlURL)
	require.NoError(t, err)
	const secret = "kerong-watch-secret"
	srv, err := gateway.New(t.Context(), gateway.Config{
		GatewayID: "GW-0002", Secret: secret, DBPath: filepath.Join(t.TempDir(), "gw.db"), Layout: layout,
		Open:          gateway.OpenPolicy{AttemptTimeout: 3 * time.Second, Attempts: 3, RetryDelay: 20 * time.Millisecond},
		SensorTimeout: 500 * time.Millisecond, Version: "test", Logger: slog.New(slog.DiscardHandler),
		Watch: gateway.WatchConfig{Interval: 50 * time.Millisecond, DoorAjarAfter: 600 * time.Millisecond, OfflineAfter: 3},
	}, ctl)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	do := func(method, path string) (int, []byte) {
		req, err := http.NewRequestWithContext(t.Context(), method, hs.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+secret)
		r := send(t, req)
		return r.status, r.body
	}
	get := func(path string) (int, []byte) { return do(http.MethodGet, path) }

	// Lock 3 (locker 203) pried open: no pulse, forced_open, out of service; then ajar.
	require.True(t, emu.ForceOpen(1, 3))
	alerts := alertsFrom(t, get, 0, 2)
	require.Len(t, alerts, 2)
	assert.Equal(t, gwapi.AlertForcedOpen, alerts[0].Kind)
	require.NotNil(t, alerts[0].LockerID)
	assert.Equal(t, 203, *alerts[0].LockerID)
	assert.Equal(t, "CTL-1", alerts[0].ControllerID)
	assert.Equal(t, gwapi.AlertDoorAjar, alerts[1].Kind)
	assert.Equal(t, 0, emu.Pulses(1, 3))
	status, body := do(http.MethodGet, "/lockers/203")
	require.Equal(t, http.StatusOK, status, "%s", body)
	lk := decode[gateway.Locker](t, reply{status: status, body: body})
	assert.True(t, lk.OutOfService)
	require.NotNil(t, lk.ReasonCode)
	assert.Equal(t, "FORCED_OPEN", *lk.ReasonCode)
	require.True(t, emu.CloseDoor(1, 3, false))

	// A pickup that leaves an item behind.
	status, body = do(http.MethodPost, "/transactions")
	require.Equal(t, http.StatusCreated, status, "%s", body)
	tx := decode[gateway.TransactionResponse](t, reply{status: status, body: body})
	status, body = do(http.MethodPost, "/transactions/"+tx.TransactionID+"/open")
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.True(t, emu.CloseDoor(1, tx.LockerID-200, true))
	status, body = do(http.MethodDelete, "/transactions/"+tx.TransactionID)
	require.Equal(t, http.StatusNoContent, status, "%s", body)
	left := alertOf(t, get, alerts[1].Seq, gwapi.AlertItemLeft)
	require.NotNil(t, left.LockerID)
	assert.Equal(t, tx.LockerID, *left.LockerID)
	assert.Equal(t, 1, emu.Pulses(1, tx.LockerID-200), "the pickup's own open pulsed once")
	status, body = do(http.MethodGet, "/alerts?limit=1000")
	require.Equal(t, http.StatusOK, status, "%s", body)
	for _, a := range decode[gateway.AlertList](t, reply{status: status, body: body}).Alerts {
		if a.Kind == gwapi.AlertForcedOpen {
			assert.Equal(t, 203, *a.LockerID, "the pickup's own open was not forced")
		}
	}

	// The board falls silent, and comes back.
	require.NoError(t, emu.SetFault(1, kerongemu.Fault{Kind: kerongemu.FaultBoardAbsent}))
	off := alertOf(t, get, left.Seq, gwapi.AlertControllerOffline)
	assert.Equal(t, "CTL-1", off.ControllerID)
	require.NoError(t, emu.SetFault(1, kerongemu.Fault{}))
	on := alertOf(t, get, off.Seq, gwapi.AlertControllerOnline)
	assert.Equal(t, "CTL-1", on.ControllerID)
}
