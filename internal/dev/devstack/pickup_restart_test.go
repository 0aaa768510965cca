package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/loadclient"
	"github.com/lockernet/lockernet/internal/dev/syncbuf"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/webhook"
)

// embeddedStackSettings are make run's settings on free addresses, a fresh database and data
// directory, with the children built into binDir.
func embeddedStackSettings(t *testing.T, binDir string) Settings {
	t.Helper()
	addrs := freeAddrs(t, 8)
	env := map[string]string{
		"DATABASE_URL": testenv.NewDatabase(t), "LOCKERNET_DATA_DIR": t.TempDir(), "TEMPORAL_ADDRESS": "",
		"LOCKERNET_API_ADDR": addrs[0], "LOCKERNET_WORKER_ADDR": addrs[1], "LOCKERNET_TOWERSIM_ADDR": addrs[2],
		"LOCKERNET_GW1_ADDR": addrs[3], "LOCKERNET_GW1_SIM_ADDR": addrs[4], "LOCKERNET_GW2_ADDR": addrs[5], "LOCKERNET_GW2_SIM_ADDR": addrs[6],
		"LOCKERNET_ADMIN_ADDR":    addrs[7],
		"LOCKERNET_TEMPORAL_PORT": strconv.Itoa(freeTemporalPorts(t)), "LOCKERNET_TEMPORAL_UI_PORT": "0",
		"LOCKERNET_DEBUG_ADDR": "", "LOCKERNET_API_DEBUG_ADDR": "", "LOCKERNET_WORKER_DEBUG_ADDR": "",
		"LOCKERNET_LOG_LEVEL": "warn",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	s, err := LoadSettings()
	require.NoError(t, err)
	s.BinDir = binDir
	return s
}

// runningStack is make run's shape started by a test.
type runningStack struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	out    *syncbuf.Buffer
}

// startEmbeddedStack runs make run's shape with s until the test ends or stop is called, and
// returns once every child answers.
func startEmbeddedStack(t *testing.T, s Settings) *runningStack {
	t.Helper()
	ready := make(chan struct{})
	s.OnReady = func() { close(ready) }
	rs := &runningStack{out: &syncbuf.Buffer{}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	rs.cancel = cancel
	go func() {
		defer close(rs.done)
		rs.err = Run(ctx, s, slog.New(slog.NewTextHandler(rs.out, nil)), rs.out)
	}()
	t.Cleanup(func() {
		rs.stop(t)
		if t.Failed() {
			t.Logf("stack output (tail):\n%s", rs.out.Tail(8000))
		}
	})
	select {
	case <-ready:
	case <-rs.done:
		t.Fatalf("the stack stopped during start-up: %v\n%s", rs.err, rs.out.Tail(8000))
	case <-time.After(4 * time.Minute):
		t.Fatalf("the stack did not come up within 4 minutes\n%s", rs.out.Tail(8000))
	}
	return rs
}

// stop stops every process of the stack as Ctrl-C does and waits for them.
func (rs *runningStack) stop(t *testing.T) {
	t.Helper()
	rs.cancel()
	select {
	case <-rs.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the stack did not stop within 60 s of Ctrl-C")
	}
}

// hookLog is a verifying webhook receiver that keeps each event once and counts redeliveries
// and refusals.
type hookLog struct {
	mu      sync.Mutex
	events  []webhook.Payload
	repeats int
	refused []string
}

func (h *hookLog) receiver(key []byte) *webhook.Receiver {
	return &webhook.Receiver{Key: key,
		Event:     func(p webhook.Payload) { h.mu.Lock(); h.events = append(h.events, p); h.mu.Unlock() },
		Duplicate: func(string) { h.mu.Lock(); h.repeats++; h.mu.Unlock() },
		Refused:   func(r string) { h.mu.Lock(); h.refused = append(h.refused, r); h.mu.Unlock() }}
}

// of lists the received events of typ for pickup window id, each with its detail.
func (h *hookLog) of(typ, window string) []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]any
	for _, p := range h.events {
		var d struct {
			Window struct {
				ID string `json:"id"`
			} `json:"window"`
			Detail map[string]any `json:"detail"`
		}
		if p.Type == typ && json.Unmarshal(p.Data, &d) == nil && d.Window.ID == window {
			out = append(out, d.Detail)
		}
	}
	return out
}

// pickupWindow is what GET …/pickup-window answers, in part.
type pickupWindow struct {
	ID             string     `json:"id"`
	Status         string     `json:"status"`
	PickupBy       time.Time  `json:"pickupBy"`
	RemindersSent  int        `json:"remindersSent"`
	ExtensionsLeft int        `json:"extensionsLeft"`
	OverdueAt      *time.Time `json:"overdueAt"`
	ClosedAt       *time.Time `json:"closedAt"`
}

// towerToken is a locker token as the tower API answers it, in part.
type towerToken struct {
	ID          string `json:"id"`
	Payload     string `json:"payload"`
	PayloadAuth string `json:"payload_auth"`
}

// A parcel's pickup window, driven through HTTP on make run's whole shape, across a stop of
// every process: the reminder and an extension before the stop, the end passing while nothing
// runs, then after the start the overdue mark and the return request made once, the refusals,
// the return token opening the locker in the tower simulator, and every event delivered once,
// signed, at a receiver.
func TestPickupWindowAcrossWholeSystemRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded Temporal server and every service, twice")
	}
	s := embeddedStackSettings(t, buildBinaries(t, false))
	stack := startEmbeddedStack(t, s)
	creds, err := seed.ReadCredentials(filepath.Join(s.DataDir, seed.CredentialsFile))
	require.NoError(t, err)
	ctx := context.Background()
	c := loadclient.New(30 * time.Second)
	app := map[string]string{"x-api-key": creds.AppEngineAPIKey}
	call := func(method, url string, h map[string]string, body any, want int, v any) {
		t.Helper()
		a, err := c.DoJSON(ctx, method, url, h, body)
		require.NoError(t, err)
		require.Equal(t, want, a.Status, "%s %s: %s", method, url, a.Body)
		if v != nil {
			require.NoError(t, json.Unmarshal(a.Body, v))
		}
	}

	// The policy: a 20 s window, a reminder 14 s before its end, one extension of 12 s, and a
	// return requested when it runs out; an endpoint for the parcel events at a receiver here.
	call(http.MethodPut, creds.APIURL+"/pickup-policy", app, map[string]any{"window_seconds": 20,
		"reminder_offsets_seconds": []int{14}, "max_extensions": 1, "extension_seconds": 12, "on_expiry": "request_return"}, http.StatusOK, nil)
	var hooks hookLog
	rcv := &receiverSwitch{}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	var ep struct {
		Secret string `json:"secret"`
	}
	call(http.MethodPost, creds.APIURL+"/webhooks/endpoints", app, map[string]any{"url": srv.URL + "/hooks",
		"event_types": []string{"parcel.pickup_reminder", "parcel.pickup_extended", "parcel.overdue", "parcel.return_requested", "parcel.returned"}},
		http.StatusCreated, &ep)
	key, err := webhook.ParseSecret(ep.Secret)
	require.NoError(t, err)
	rcv.set(hooks.receiver(key))

	// A drop-off at the first demo tower's first available locker, through the tower simulator.
	tower := creds.Towers[0].ID
	tok := loadclient.NewToken(c, creds.APIURL, creds.ServiceProvider.ClientID, creds.ServiceProvider.ClientSecret)
	auth, err := tok.Authorization(ctx)
	require.NoError(t, err)
	var lockers []struct {
		ID     int64 `json:"id"`
		Status struct {
			Name string `json:"name"`
		} `json:"status"`
	}
	call(http.MethodGet, fmt.Sprintf("%s/api/v1/towers/%s/lockers", creds.APIURL, tower), auth, nil, http.StatusOK, &lockers)
	var locker int64
	for _, k := range lockers {
		if k.Status.Name == "available" {
			locker = k.ID
			break
		}
	}
	require.NotZero(t, locker, "tower %s has an available locker", tower)
	path := fmt.Sprintf("%s/api/v1/towers/%s/lockers/%d/", creds.APIURL, tower, locker)
	open := func(tk towerToken, withItem bool) {
		t.Helper()
		var res struct {
			Opened        bool   `json:"opened"`
			UploadError   string `json:"uploadError"`
			EventsPending int    `json:"eventsPending"`
		}
		call(http.MethodPost, creds.TowerSimURL+"/sim/towers/"+tower+"/open", nil,
			map[string]any{"payload": tk.Payload, "payload_auth": tk.PayloadAuth, "close_with_item": withItem}, http.StatusOK, &res)
		require.True(t, res.Opened, "the tower opened for token %s", tk.ID)
		require.Empty(t, res.UploadError)
		require.Zero(t, res.EventsPending, "the cloud took the tower's events")
	}
	getWindow := func() pickupWindow {
		t.Helper()
		auth, err := tok.Authorization(ctx)
		require.NoError(t, err)
		var w pickupWindow
		call(http.MethodGet, path+"pickup-window", auth, nil, http.StatusOK, &w)
		return w
	}
	var drop towerToken
	call(http.MethodPost, path+"dropoff-locker-tokens", auth, map[string]any{"duration": 600}, http.StatusCreated, &drop)
	open(drop, true)
	w := getWindow()
	require.Equal(t, "open", w.Status)
	assert.Equal(t, 1, w.ExtensionsLeft)

	// Before the stop: the reminder, then the one extension (a second is refused).
	require.Eventually(t, func() bool { return len(hooks.of("parcel.pickup_reminder", w.ID)) == 1 }, 30*time.Second, 100*time.Millisecond,
		"the reminder 14 s before the end is delivered")
	var ext pickupWindow
	call(http.MethodPost, path+"pickup-window/extensions", auth, nil, http.StatusOK, &ext)
	assert.Equal(t, w.PickupBy.Add(12*time.Second), ext.PickupBy, "the extension moves the end by 12 s")
	assert.Zero(t, ext.ExtensionsLeft)
	call(http.MethodPost, path+"pickup-window/extensions", auth, nil, http.StatusConflict, nil)

	// Every process stops; the end passes while none runs.
	stack.stop(t)
	require.NoError(t, stack.err)
	time.Sleep(time.Until(ext.PickupBy) + time.Second)
	assert.Empty(t, hooks.of("parcel.overdue", w.ID), "nothing marks the window while nothing runs")

	// After the start: the overdue mark and the policy's return request, once each.
	startEmbeddedStack(t, s)
	require.Eventually(t, func() bool {
		return len(hooks.of("parcel.overdue", w.ID)) == 1 && len(hooks.of("parcel.return_requested", w.ID)) == 1
	}, 60*time.Second, 100*time.Millisecond, "parcel.overdue and parcel.return_requested are delivered after the start")
	assert.Equal(t, "window_ran_out", hooks.of("parcel.return_requested", w.ID)[0]["reason"])
	auth, err = tok.Authorization(ctx)
	require.NoError(t, err)
	got := getWindow()
	assert.Equal(t, "return_requested", got.Status)
	if assert.NotNil(t, got.OverdueAt) {
		assert.Equal(t, ext.PickupBy, *got.OverdueAt, "overdue from the end, not from the start")
	}
	call(http.MethodPost, path+"pickup-window/extensions", auth, nil, http.StatusConflict, nil)

	// The sender's return token opens the locker in the tower simulator; the parcel is out.
	var ret struct {
		Token towerToken `json:"token"`
	}
	call(http.MethodPost, path+"pickup-window/return", auth, map[string]any{"duration": 600, "client_info": "return after restart"},
		http.StatusCreated, &ret)
	open(ret.Token, false)
	require.Eventually(t, func() bool { return len(hooks.of("parcel.returned", w.ID)) == 1 }, 30*time.Second, 100*time.Millisecond,
		"parcel.returned is delivered")
	got = getWindow()
	assert.Equal(t, "returned", got.Status)
	assert.NotNil(t, got.ClosedAt)

	// Every event of the window once: no step ran twice across the restart, no delivery repeated.
	time.Sleep(2 * time.Second)
	assert.Len(t, hooks.of("parcel.pickup_reminder", w.ID), 1)
	assert.Len(t, hooks.of("parcel.pickup_extended", w.ID), 1)
	assert.Len(t, hooks.of("parcel.overdue", w.ID), 1)
	assert.Len(t, hooks.of("parcel.return_requested", w.ID), 2, "the policy's at the end, then the sender's")
	assert.Len(t, hooks.of("parcel.returned", w.ID), 1)
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	assert.Zero(t, hooks.repeats, "no event delivered twice")
	assert.Empty(t, hooks.refused, "every delivery signed with the endpoint's secret")
}

// receiverSwitch serves the receiver set once the endpoint's secret is known; before that it
// answers 503 (the delivery is retried).
type receiverSwitch struct {
	mu sync.Mutex
	h  http.Handler
}

func (r *receiverSwitch) set(h http.Handler) { r.mu.Lock(); r.h = h; r.mu.Unlock() }

func (r *receiverSwitch) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	h := r.h
	r.mu.Unlock()
	if h == nil {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	h.ServeHTTP(w, req)
}

// Each lock-board alert on make run's shape, from the byte-level Kerong emulator behind
// GW-0002 to a signed webhook delivery: a door forced open (the locker out of service at the
// gateway and in the cloud's mirror), left ajar, an item left after a pickup, the board going
// silent and back — each event once.
func TestLockBoardAlertsFromTheKerongEmulatorToWebhooks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded Temporal server and every service")
	}
	t.Setenv("LOCKERNET_GATEWAY_DOOR_AJAR_AFTER", "2s")
	s := embeddedStackSettings(t, buildBinaries(t, false))
	startEmbeddedStack(t, s)
	creds, err := seed.ReadCredentials(filepath.Join(s.DataDir, seed.CredentialsFile))
	require.NoError(t, err)
	gw := creds.Gateways[1]
	require.Equal(t, "GW-0002", gw.Serial)
	ctx := context.Background()
	c := loadclient.New(30 * time.Second)
	call := func(method, url string, h map[string]string, body any, v any) {
		t.Helper()
		a, err := c.DoJSON(ctx, method, url, h, body)
		require.NoError(t, err)
		require.Less(t, a.Status, 300, "%s %s: %d %s", method, url, a.Status, a.Body)
		if v != nil {
			require.NoError(t, json.Unmarshal(a.Body, v))
		}
	}
	var hooks hookLog
	rcv := &receiverSwitch{}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	var ep struct {
		Secret string `json:"secret"`
	}
	call(http.MethodPost, creds.APIURL+"/webhooks/endpoints", map[string]string{"x-api-key": creds.AppEngineAPIKey},
		map[string]any{"url": srv.URL + "/hooks", "event_types": []string{"locker.forced_open", "locker.door_ajar", "locker.item_left",
			"gateway.controller_offline", "gateway.controller_online"}}, &ep)
	key, err := webhook.ParseSecret(ep.Secret)
	require.NoError(t, err)
	rcv.set(hooks.receiver(key))
	local := map[string]string{"Authorization": "Bearer " + gw.Secret}
	var lockers []struct {
		LockerID int `json:"lockerId"`
	}
	call(http.MethodGet, gw.URL+"/lockers", local, nil, &lockers)
	require.NotEmpty(t, lockers)
	wait := func(typ string, match func(map[string]any) bool) map[string]any {
		t.Helper()
		var found map[string]any
		require.Eventually(t, func() bool {
			for _, d := range hooks.alerts(typ) {
				if match(d) {
					found = d
					return true
				}
			}
			return false
		}, 60*time.Second, 100*time.Millisecond, "%s delivered", typ)
		return found
	}

	// A door pried open at the emulator: no pulse was sent.
	forced := lockers[0].LockerID
	call(http.MethodPost, fmt.Sprintf("%s/sim/lockers/%d/force-open", gw.SimURL, forced), nil, nil, nil)
	d := wait("locker.forced_open", func(d map[string]any) bool { return d["lockerId"] == float64(forced) })
	assert.Equal(t, "GW-0002", d["gatewayId"])
	assert.Equal(t, true, d["outOfService"])
	assert.Equal(t, "FORCED_OPEN", d["reasonCode"])
	board, _ := d["controllerId"].(string)
	var mirrored bool
	queryOne(t, s.DatabaseURL, fmt.Sprintf(`SELECT gl.out_of_service FROM gateway_lockers gl JOIN gateways g ON g.id = gl.gateway_id
		WHERE g.serial = 'GW-0002' AND gl.locker_id = %d`, forced), &mirrored)
	assert.True(t, mirrored, "the forced locker is out of service in the cloud's mirror")
	wait("locker.door_ajar", func(d map[string]any) bool { return d["lockerId"] == float64(forced) })
	call(http.MethodPost, fmt.Sprintf("%s/sim/lockers/%d/close", gw.SimURL, forced), nil, map[string]any{"itemInside": false}, nil)

	// A pickup that leaves the item: the gateway's own open, the door shut over the item.
	var tx struct {
		TransactionID string `json:"transactionId"`
		LockerID      int    `json:"lockerId"`
	}
	call(http.MethodPost, gw.URL+"/transactions", local, map[string]any{"transactionId": "left-behind"}, &tx)
	call(http.MethodPost, gw.URL+"/transactions/"+tx.TransactionID+"/open", local, nil, nil)
	call(http.MethodPost, fmt.Sprintf("%s/sim/lockers/%d/close", gw.SimURL, tx.LockerID), nil, map[string]any{"itemInside": true}, nil)
	call(http.MethodDelete, gw.URL+"/transactions/"+tx.TransactionID, local, nil, nil)
	d = wait("locker.item_left", func(d map[string]any) bool { return d["lockerId"] == float64(tx.LockerID) })
	assert.Equal(t, tx.TransactionID, d["transactionId"])

	// The forced locker's board stops answering on the bus, then answers again.
	require.NotEmpty(t, board, "the forced door's alert names its board")
	call(http.MethodPost, gw.SimURL+"/sim/faults", nil, map[string]any{"mode": "board_absent", "controllerId": board}, nil)
	wait("gateway.controller_offline", func(d map[string]any) bool { return d["controllerId"] == board })
	call(http.MethodPost, gw.SimURL+"/sim/faults", nil, map[string]any{"mode": "none"}, nil)
	wait("gateway.controller_online", func(d map[string]any) bool { return d["controllerId"] == board })

	time.Sleep(2 * time.Second) // a second recording of any alert would have arrived
	for _, typ := range []string{"locker.forced_open", "locker.door_ajar", "locker.item_left", "gateway.controller_offline", "gateway.controller_online"} {
		assert.Len(t, hooks.alerts(typ), 1, typ)
	}
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	assert.Zero(t, hooks.repeats, "no event delivered twice")
	assert.Empty(t, hooks.refused, "every delivery signed with the endpoint's secret")
}

// alerts lists the data of the received events of typ.
func (h *hookLog) alerts(typ string) []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]any
	for _, p := range h.events {
		var d map[string]any
		if p.Type == typ && json.Unmarshal(p.Data, &d) == nil {
			out = append(out, d)
		}
	}
	return out
}
