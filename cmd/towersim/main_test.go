package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/dev/syncbuf"
	"github.com/lockernet/lockernet/internal/towerproto"
)

const towerID = "0100000000000014"

var secret = bytes.Repeat([]byte{0x42}, 32)

func noEnv(string) string { return "" }

func writeConfig(t *testing.T, apiBaseURL string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := towersim.Config{
		APIBaseURL:   apiBaseURL,
		ClientID:     "sim-client",
		ClientSecret: "sim-secret",
		StateDir:     filepath.Join(dir, "state"),
		Towers:       []towersim.TowerConfig{{ID: towerID, SecretHex: hex.EncodeToString(secret), LockerIDs: []int64{1, 2}}},
	}
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	path := filepath.Join(dir, "towersim.json")
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	return path
}

func token(t *testing.T, locker int64, typ towerproto.TokenType, expires time.Time) (payload, auth string) {
	t.Helper()
	p, a, err := towerproto.EncodeToken(towerproto.Token{
		ID: uuid.New(), TowerID: towerID, LockerID: locker, Type: typ, ExpiresAt: expires,
	}, towerproto.TokenKey(secret))
	require.NoError(t, err)
	return p, a
}

// simServer runs the control API in-process, uploading to a cloud that takes every batch.
func simServer(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth/token", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"jwt","token_type":"Bearer","expires_in":300}`))
	})
	mux.HandleFunc("POST /sdk/v1/towers/{tower}/events", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"msg":"ok","accepted":3,"duplicates":0}`))
	})
	// Sessions sealed for the tower as the cloud does; no commands and no configuration yet.
	mux.HandleFunc("POST /sdk/v1/towers/{tower}/session-token", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Duration int      `json:"duration"`
			Claims   []string `json:"claims"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		perm, err := towerproto.ClaimsPermission(req.Claims)
		if err != nil {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		seed := bytes.Repeat([]byte{0x17}, towerproto.SeedSize)
		now := time.Now()
		p, a, err := towerproto.SealSession(towerproto.Session{ID: uuid.New(), TowerID: towerID, ClientID: "sim-client", Claims: req.Claims,
			Permission: perm, Seed: seed, IssuedAt: now, ExpiresAt: now.Add(time.Duration(req.Duration) * time.Second)},
			towerproto.SessionKey(secret), rand.Reader)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"payload": p, "payload_auth": a, "session_seed": hex.EncodeToString(seed), "tower_id": r.PathValue("tower")})
	})
	mux.HandleFunc("GET /sdk/v1/towers/{tower}/commands", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[]`))
	})
	mux.HandleFunc("GET /sdk/v1/towers/{tower}/configuration", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNotFound)
	})
	cloud := httptest.NewServer(mux)
	t.Cleanup(cloud.Close)
	cfg, err := towersim.LoadConfig(writeConfig(t, cloud.URL))
	require.NoError(t, err)
	sim, err := towersim.NewSimulator(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestOpenCommand(t *testing.T) {
	t.Parallel()
	url := simServer(t)
	dropP, dropA := token(t, 1, towerproto.TokenDropoff, time.Now().Add(time.Hour))
	pickP, pickA := token(t, 1, towerproto.TokenPickup, time.Now().Add(time.Hour))
	staleP, staleA := token(t, 1, towerproto.TokenDropoff, time.Now().Add(time.Hour)) // of the possession the pickup ends
	oldP, oldA := token(t, 2, towerproto.TokenDropoff, time.Now().Add(-time.Minute))

	// The steps share one simulator and run in order.
	steps := []struct {
		name       string
		args       []string
		wantStatus int
		wantOut    string
		wantErr    string
	}{
		{
			name:       "drop-off opens and closes with the item",
			args:       []string{"open", "-url", url, "-tower", towerID, "-payload", dropP, "-auth", dropA},
			wantStatus: exitOK,
			wantOut: "opened: tower 0100000000000014, locker 1 (dropoff token); door closed with the item inside\n" +
				"events: 3 uploaded, 0 queued\n",
		},
		{
			name:       "the same token again is refused",
			args:       []string{"open", "-url", url, "-tower", towerID, "-payload", dropP, "-auth", dropA},
			wantStatus: exitRefused,
			wantOut:    "refused: already_used (the token has already opened the door once)\nthe door stayed shut; nothing was recorded\n",
		},
		{
			name:       "pickup with -empty",
			args:       []string{"open", "-url", url, "-tower", towerID, "-payload", pickP, "-auth", pickA, "-empty"},
			wantStatus: exitOK,
			wantOut: "opened: tower 0100000000000014, locker 1 (pickup token); door closed empty\n" +
				"events: 3 uploaded, 0 queued\n",
		},
		{
			name:       "a token of the ended possession",
			args:       []string{"open", "-url", url, "-tower", towerID, "-payload", staleP, "-auth", staleA},
			wantStatus: exitRefused,
			wantOut: "refused: stale_generation (the token belongs to an earlier possession of the locker: its generation is older than the tower's)\n" +
				"the door stayed shut; nothing was recorded\n",
		},
		{
			name:       "expired token",
			args:       []string{"open", "-url", url, "-tower", towerID, "-payload", oldP, "-auth", oldA},
			wantStatus: exitRefused,
			wantOut:    "refused: expired (the token has expired by the tower's clock)\nthe door stayed shut; nothing was recorded\n",
		},
		{
			name:       "unknown tower",
			args:       []string{"open", "-url", url, "-tower", "ffffffffffffffff", "-payload", dropP, "-auth", dropA},
			wantStatus: exitNoAnswer,
			wantErr:    `towersim: open on tower ffffffffffffffff: simulator answered 404 tower_not_found: no simulated tower "ffffffffffffffff"` + "\n",
		},
		{
			name:       "missing flags",
			args:       []string{"open", "-url", url, "-tower", towerID},
			wantStatus: exitUsage,
		},
		{
			name:       "both -empty and -item",
			args:       []string{"open", "-tower", towerID, "-payload", dropP, "-auth", dropA, "-empty", "-item"},
			wantStatus: exitUsage,
		},
	}
	for _, st := range steps {
		var stdout, stderr bytes.Buffer
		status := run(context.Background(), st.args, noEnv, &stdout, &stderr, nil)
		assert.Equal(t, st.wantStatus, status, "%s: stderr %s", st.name, stderr.String())
		if st.wantOut != "" {
			assert.Equal(t, st.wantOut, stdout.String(), st.name)
		}
		if st.wantErr != "" {
			assert.Equal(t, st.wantErr, stderr.String(), st.name)
		}
	}
}

func TestOpenCommandWithoutSimulator(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now

	var stdout, stderr bytes.Buffer
	status := run(context.Background(), []string{"open", "-url", "http://" + addr, "-tower", towerID, "-payload", "01", "-auth", "00"}, noEnv, &stdout, &stderr, nil)
	assert.Equal(t, exitNoAnswer, status)
	assert.Contains(t, stderr.String(), "call simulator")
	assert.Empty(t, stdout.String())
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"fly"}, {"serve"}, {"serve", "-config", "x", "extra"}, {"serve", "-nope"}} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, exitUsage, run(context.Background(), args, noEnv, &stdout, &stderr, nil), "%q", args)
		assert.Contains(t, stderr.String(), "usage:")
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, exitOK, run(context.Background(), []string{"help"}, noEnv, &stdout, &stderr, nil))
	assert.Contains(t, stdout.String(), "towersim serve")
}

func TestServeBusyPortIsAClearError(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })

	cfgPath := writeConfig(t, "")
	var stdout, stderr bytes.Buffer
	status := run(context.Background(), []string{"serve", "-config", cfgPath, "-addr", ln.Addr().String()}, noEnv, &stdout, &stderr, nil)
	assert.Equal(t, exitRefused, status)
	assert.Contains(t, stderr.String(), "listen on "+ln.Addr().String())
	assert.Contains(t, stderr.String(), "address already in use")
	_, err = os.Stat(filepath.Join(filepath.Dir(cfgPath), "state"))
	assert.ErrorIs(t, err, os.ErrNotExist, "no tower booted, no state written")
}

func TestServeBadConfig(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	status := run(context.Background(), []string{"serve", "-config", filepath.Join(t.TempDir(), "missing.json")}, noEnv, &stdout, &stderr, nil)
	assert.Equal(t, exitRefused, status)
	assert.Contains(t, stderr.String(), "read config")
}

func TestServeAnswersAndStopsOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs := make(chan string, 1)
	done := make(chan int, 1)
	var stderr syncbuf.Buffer
	env := func(name string) string {
		if name == "LOCKERNET_TOWERSIM_CONFIG" {
			return writeConfig(t, "")
		}
		return ""
	}
	go func() {
		done <- run(ctx, []string{"serve", "-addr", "127.0.0.1:0", "-log-format", "json"}, env, &bytes.Buffer{}, &stderr,
			func(addr string) { addrs <- addr })
	}()
	var addr string
	select {
	case addr = <-addrs:
	case status := <-done:
		t.Fatalf("serve returned %d before listening: %s", status, stderr.String())
	}

	resp, err := http.Get("http://" + addr + "/sim/towers")
	require.NoError(t, err)
	var towers []towersim.TowerStatus
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&towers))
	resp.Body.Close()
	require.Len(t, towers, 1)
	assert.Equal(t, towerID, towers[0].ID)

	payload, auth := token(t, 1, towerproto.TokenDropoff, time.Now().Add(time.Hour))
	var stdout bytes.Buffer
	status := run(ctx, []string{"open", "-url", "http://" + addr, "-tower", towerID, "-payload", payload, "-auth", auth}, noEnv, &stdout, &bytes.Buffer{}, nil)
	// Without a cloud the phone gets no session, so the tower is never asked to open.
	assert.Equal(t, exitRefused, status)
	assert.Contains(t, stdout.String(), "refused: no_session")

	cancel() // what SIGINT/SIGTERM do through signal.NotifyContext
	assert.Equal(t, exitOK, <-done)
	assert.Contains(t, stderr.String(), "tower simulator stopped")
}

// The dev stack's database re-created with its data folder kept: the provisioning file names
// a new secret, and the saved state of the old one is dropped with a warning at start.
func TestServeDropsStateOfAnotherSecret(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "")
	cfg, err := towersim.LoadConfig(path)
	require.NoError(t, err)
	oldSecret := bytes.Repeat([]byte{0x24}, 32)
	old, err := towersim.NewTower(towersim.TowerConfig{ID: towerID, SecretHex: hex.EncodeToString(oldSecret), LockerIDs: []int64{1, 2}},
		filepath.Join(cfg.StateDir, "tower-"+towerID+".json"))
	require.NoError(t, err)
	p, a, err := towerproto.EncodeToken(towerproto.Token{ID: uuid.New(), TowerID: towerID, LockerID: 1, Type: towerproto.TokenDropoff,
		Generation: 5, ExpiresAt: time.Now().Add(time.Hour)}, towerproto.TokenKey(oldSecret))
	require.NoError(t, err)
	_, err = old.Open(context.Background(), p, a, true)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs := make(chan string, 1)
	done := make(chan int, 1)
	var stderr syncbuf.Buffer
	go func() {
		done <- run(ctx, []string{"serve", "-config", path, "-addr", "127.0.0.1:0", "-log-format", "json"}, noEnv, &bytes.Buffer{}, &stderr,
			func(addr string) { addrs <- addr })
	}()
	var addr string
	select {
	case addr = <-addrs:
	case status := <-done:
		t.Fatalf("serve returned %d before listening: %s", status, stderr.String())
	}
	resp, err := http.Get("http://" + addr + "/sim/towers")
	require.NoError(t, err)
	var towers []towersim.TowerStatus
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&towers))
	resp.Body.Close()
	require.Len(t, towers, 1)
	assert.Equal(t, uint32(0), towers[0].Lockers[0].Generation, "the old secret's floor is gone")
	assert.Equal(t, uint32(2), towers[0].BootEpoch, "the boot-epoch counter carries on")
	assert.Zero(t, towers[0].EventsPending)
	assert.Contains(t, stderr.String(), "saved tower state dropped: it was built with another tower secret")

	cancel()
	assert.Equal(t, exitOK, <-done)
}
