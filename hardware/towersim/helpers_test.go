package towersim_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/towerproto"
)

const (
	towerA = "0100000000000014"
	towerB = "010000000000abcd"
)

var (
	secretA = bytes.Repeat([]byte{0xa5}, 32)
	secretB = bytes.Repeat([]byte{0xb6}, 32)
	t0      = time.Date(2030, 3, 4, 12, 0, 0, 0, time.UTC)
)

func towerConfigA() towersim.TowerConfig {
	return towersim.TowerConfig{ID: towerA, SecretHex: hex.EncodeToString(secretA), LockerIDs: []int64{959, 960, 961}}
}

func towerConfigB() towersim.TowerConfig {
	return towersim.TowerConfig{ID: towerB, SecretHex: hex.EncodeToString(secretB), LockerIDs: []int64{959, 970}}
}

// fakeClock is the tower's clock; tests move it by hand and never sleep.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock { return &fakeClock{now: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// issued is a token as the cloud hands it out.
type issued struct {
	towerproto.Token
	payload, auth string
}

// issue signs a token the way the cloud does; by default a drop-off for locker 959 of tower A
// in generation 0, valid for 5 minutes from t0.
func issue(t *testing.T, secret []byte, modify func(*towerproto.Token)) issued {
	t.Helper()
	tok := towerproto.Token{
		ID:        uuid.New(),
		TowerID:   towerA,
		LockerID:  959,
		Type:      towerproto.TokenDropoff,
		ExpiresAt: t0.Add(5 * time.Minute),
		Nonce:     [8]byte{1, 2, 3, 4, 5, 6, 7, 8},
	}
	if modify != nil {
		modify(&tok)
	}
	p, a, err := towerproto.EncodeToken(tok, towerproto.TokenKey(secret))
	require.NoError(t, err)
	return issued{Token: tok, payload: p, auth: a}
}

type eventID struct {
	tower string
	epoch uint32
	seq   uint64
}

// fakeCloud plays the token service and the events endpoint of the apiserver. It verifies
// every batch with towerproto.DecodeBatch, as the real one does.
type fakeCloud struct {
	t      *testing.T
	srv    *httptest.Server
	keys   map[string][]byte // tower id → event key
	mu     sync.Mutex
	tokens []string // issued bearer tokens
	// failWith, when non-zero, is the status the events endpoint answers; -1 drops the
	// connection without an answer.
	failWith    int
	unauthorize map[string]bool // bearer tokens answered with 401
	requests    []cloudRequest
	received    map[eventID]towerproto.Event
	deliveries  map[eventID]int
	tokenForms  []map[string]string
}

type cloudRequest struct {
	path, bearer string
	bodyLen      int
	envelopes    []towerproto.BatchEnvelope
	batches      []towerproto.Batch
}

func newFakeCloud(t *testing.T) *fakeCloud {
	t.Helper()
	c := &fakeCloud{
		t:           t,
		keys:        map[string][]byte{towerA: towerproto.EventKey(secretA), towerB: towerproto.EventKey(secretB)},
		unauthorize: map[string]bool{},
		received:    map[eventID]towerproto.Event{},
		deliveries:  map[eventID]int{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth/token", c.handleToken)
	mux.HandleFunc("POST /sdk/v1/towers/{tower}/events", c.handleEvents)
	mux.HandleFunc("POST /sdk/v1/towers/{tower}/session-token", c.handleSession)
	mux.HandleFunc("GET /sdk/v1/towers/{tower}/configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"status":404,"detail":"no configuration"}`)
	})
	mux.HandleFunc("GET /sdk/v1/towers/{tower}/commands", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `[]`)
	})
	c.srv = httptest.NewServer(mux)
	t.Cleanup(c.srv.Close)
	return c
}

func (c *fakeCloud) URL() string { return c.srv.URL }

func (c *fakeCloud) setFail(status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failWith = status
}

// fail reports a broken request from a server goroutine (require must not be used there).
func (c *fakeCloud) fail(w http.ResponseWriter, format string, args ...any) {
	c.t.Errorf("fake cloud: "+format, args...)
	w.WriteHeader(http.StatusTeapot)
}

func (c *fakeCloud) handleToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		c.fail(w, "parse token form: %v", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	form := map[string]string{}
	for k := range r.PostForm {
		form[k] = r.PostForm.Get(k)
	}
	c.tokenForms = append(c.tokenForms, form)
	if form["client_id"] != "sim-client" || form["client_secret"] != "sim-secret" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_client","error_description":"unknown client"}`)
		return
	}
	tok := fmt.Sprintf("jwt-%d", len(c.tokens)+1)
	c.tokens = append(c.tokens, tok)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":300,"scope":"tower_access"}`, tok)
}

func (c *fakeCloud) handleEvents(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.failWith {
	case 0:
	case -1:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			c.fail(w, "hijack: %v", err)
			return
		}
		conn.Close()
		return
	default:
		w.WriteHeader(c.failWith)
		fmt.Fprint(w, `{"detail":"cloud is down"}`)
		return
	}
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || bearer == "" || c.unauthorize[bearer] {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var body bytes.Buffer
	if _, err := body.ReadFrom(r.Body); err != nil {
		c.fail(w, "read body: %v", err)
		return
	}
	req := cloudRequest{path: r.URL.Path, bearer: bearer, bodyLen: body.Len()}
	if r.Header.Get("Content-Type") != "application/json" {
		c.fail(w, "content type %q", r.Header.Get("Content-Type"))
		return
	}
	if err := json.Unmarshal(body.Bytes(), &req.envelopes); err != nil {
		c.fail(w, "decode body: %v", err)
		return
	}
	tower := strings.ToLower(r.PathValue("tower"))
	accepted, dups := 0, 0
	for _, env := range req.envelopes {
		peek, err := towerproto.PeekBatchTower(env)
		if err != nil || peek != tower {
			c.fail(w, "batch names tower %q (%v), path says %q", peek, err, tower)
			return
		}
		b, err := towerproto.DecodeBatch(env, c.keys[peek])
		if err != nil {
			c.fail(w, "decode batch: %v", err)
			return
		}
		req.batches = append(req.batches, b)
		for _, e := range b.Events {
			id := eventID{b.TowerID, b.BootEpoch, e.Seq}
			c.deliveries[id]++
			if _, seen := c.received[id]; seen {
				dups++
				continue
			}
			c.received[id] = e
			accepted++
		}
	}
	c.requests = append(c.requests, req)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"accepted":%d,"duplicates":%d}`, accepted, dups)
}

// handleSession seals a session for the tower as the cloud does, with the claim asked for.
func (c *fakeCloud) handleSession(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Duration int      `json:"duration"`
		Claims   []string `json:"claims"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		c.fail(w, "decode session request: %v", err)
		return
	}
	tower := strings.ToLower(r.PathValue("tower"))
	secret := map[string][]byte{towerA: secretA, towerB: secretB}[tower]
	perm, err := towerproto.ClaimsPermission(req.Claims)
	if err != nil || secret == nil {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	payload, auth, seed := sealSession(c.t, tower, secret, perm, req.Claims, time.Duration(req.Duration)*time.Second)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"payload":%q,"payload_auth":%q,"session_seed":%q,"tower_id":%q}`, payload, auth, hex.EncodeToString(seed), r.PathValue("tower"))
}

// sealSession seals a session as the cloud does, valid from t0 (the towers' fake clock).
func sealSession(t *testing.T, tower string, secret []byte, perm towerproto.Permission, claims []string, d time.Duration) (payload, auth string, seed []byte) {
	seed = bytes.Repeat([]byte{byte(len(claims) + int(perm))}, towerproto.SeedSize)
	p, a, err := towerproto.SealSession(towerproto.Session{ID: uuid.New(), TowerID: tower, ClientID: "sim-client", Claims: claims,
		Permission: perm, Seed: seed, IssuedAt: t0.Add(-time.Minute), ExpiresAt: t0.Add(d)}, towerproto.SessionKey(secret), rand.Reader)
	if err != nil {
		t.Errorf("seal session: %v", err)
	}
	return p, a, seed
}

func (c *fakeCloud) snapshot() (requests []cloudRequest, received map[eventID]towerproto.Event, deliveries map[eventID]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	received = make(map[eventID]towerproto.Event, len(c.received))
	for k, v := range c.received {
		received[k] = v
	}
	deliveries = make(map[eventID]int, len(c.deliveries))
	for k, v := range c.deliveries {
		deliveries[k] = v
	}
	return append([]cloudRequest(nil), c.requests...), received, deliveries
}

func (c *fakeCloud) forms() []map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]string(nil), c.tokenForms...)
}

func simConfig(cloudURL, stateDir string) towersim.Config {
	return towersim.Config{
		APIBaseURL:   cloudURL,
		ClientID:     "sim-client",
		ClientSecret: "sim-secret",
		StateDir:     stateDir,
		Towers:       []towersim.TowerConfig{towerConfigA(), towerConfigB()},
	}
}
