package towersim_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
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
	t       *testing.T
	srv     *httptest.Server
	secrets map[string][]byte // tower id → the tower secret this cloud provisioned
	mu      sync.Mutex
	tokens  []string // issued bearer tokens
	// failWith, when non-zero, is the status the events endpoint answers; -1 drops the
	// connection without an answer.
	failWith    int
	unauthorize map[string]bool // bearer tokens answered with 401
	requests    []cloudRequest
	received    map[eventID]towerproto.Event
	deliveries  map[eventID]int
	tokenForms  []map[string]string
	// logs are the towers' command logs; a tower without one has no configuration (404)
	// and no commands.
	logs map[string]*fakeLog
	// signedAt is the cloud's clock when it signs commands (default t0).
	signedAt func() time.Time
}

// fakeLog is what the cloud's database holds for one tower: its lockers' generations and
// service states, the numbered command log, how far the tower reported applying it, and the
// reset reports.
type fakeLog struct {
	generations  map[int64]uint32
	outOfService map[int64]bool
	commands     []towerproto.Command // command n is commands[n-1]
	acked        uint64
	resets       []string
	// staleConfig, when set, is served instead of the current configuration.
	staleConfig []string
}

// commandTTL is how long the fake cloud's signed commands stay valid, as the real one's
// default.
const commandTTL = 24 * time.Hour

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
		secrets:     map[string][]byte{towerA: secretA, towerB: secretB},
		unauthorize: map[string]bool{},
		received:    map[eventID]towerproto.Event{},
		deliveries:  map[eventID]int{},
		logs:        map[string]*fakeLog{},
		signedAt:    func() time.Time { return t0 },
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth/token", c.handleToken)
	mux.HandleFunc("POST /sdk/v1/towers/{tower}/events", c.handleEvents)
	mux.HandleFunc("POST /sdk/v1/towers/{tower}/session-token", c.handleSession)
	mux.HandleFunc("GET /sdk/v1/towers/{tower}/configuration", c.handleConfiguration)
	mux.HandleFunc("GET /sdk/v1/towers/{tower}/commands", c.handleCommands)
	mux.HandleFunc("POST /sdk/v1/towers/{tower}/reset-events", c.handleResetEvents)
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
		b, err := towerproto.DecodeBatch(env, towerproto.EventKey(c.secrets[peek]))
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
			// As the store: the tower's report moves the log's acknowledged position
			// forward, never past its head.
			if l := c.logs[tower]; l != nil && e.Kind == towerproto.EventSyncCommands {
				l.acked = max(l.acked, min(e.Command, uint64(len(l.commands))))
			}
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
	c.mu.Lock()
	secret, now := c.secrets[tower], c.signedAt()
	c.mu.Unlock()
	perm, err := towerproto.ClaimsPermission(req.Claims)
	if err != nil || secret == nil {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	payload, auth, seed := sealSession(c.t, tower, secret, perm, req.Claims, now, time.Duration(req.Duration)*time.Second)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"payload":%q,"payload_auth":%q,"session_seed":%q,"tower_id":%q}`, payload, auth, hex.EncodeToString(seed), r.PathValue("tower"))
}

// sealSession seals a session as the cloud does at now (t0 unless a test moves the cloud's
// clock with the towers' fake clock).
func sealSession(t *testing.T, tower string, secret []byte, perm towerproto.Permission, claims []string, now time.Time, d time.Duration) (payload, auth string, seed []byte) {
	seed = bytes.Repeat([]byte{byte(len(claims) + int(perm))}, towerproto.SeedSize)
	p, a, err := towerproto.SealSession(towerproto.Session{ID: uuid.New(), TowerID: tower, ClientID: "sim-client", Claims: claims,
		Permission: perm, Seed: seed, IssuedAt: now.Add(-time.Minute), ExpiresAt: now.Add(d)}, towerproto.SessionKey(secret), rand.Reader)
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

// newFakeCloudWithSecret is a cloud that provisioned tower A with secret (tower B keeps its
// usual one), as a freshly seeded database provisions new tower secrets.
func newFakeCloudWithSecret(t *testing.T, secret []byte) *fakeCloud {
	c := newFakeCloud(t)
	c.secrets[towerA] = secret
	return c
}

// provision gives the tower a command log and lockers, each in generation 0 and in service.
func (c *fakeCloud) provision(tower string, lockers ...int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := &fakeLog{generations: map[int64]uint32{}, outOfService: map[int64]bool{}}
	for _, id := range lockers {
		l.generations[id] = 0
	}
	c.logs[tower] = l
}

// newPossession starts a new possession of a locker, as issuing a token to a new possessor
// does: the generation moves and the log gets the floor. It returns the new generation.
func (c *fakeCloud) newPossession(tower string, locker int64) uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.logs[tower]
	l.generations[locker]++
	l.commands = append(l.commands, towerproto.Command{Kind: towerproto.CommandGenerationFloor, Arg1: uint64(locker), Arg2: uint64(l.generations[locker])})
	return l.generations[locker]
}

// issueToken signs a drop-off token of the locker's current possession with the secret this
// cloud provisioned (tower A), valid for 5 minutes by the cloud's clock.
func (c *fakeCloud) issueToken(t *testing.T, locker int64) issued {
	t.Helper()
	c.mu.Lock()
	secret, gen, now := c.secrets[towerA], c.logs[towerA].generations[locker], c.signedAt()
	c.mu.Unlock()
	return issue(t, secret, func(tk *towerproto.Token) {
		tk.LockerID, tk.Generation, tk.ExpiresAt = locker, gen, now.Add(5*time.Minute)
	})
}

// head returns the last command number of the tower's log.
func (c *fakeCloud) head(tower string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return uint64(len(c.logs[tower].commands))
}

// resetReports returns the reasons of the tower's reset-events reports.
func (c *fakeCloud) resetReports(tower string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.logs[tower].resets)
}

// configurationPackets returns the tower's configuration as the cloud would sign it now.
func (c *fakeCloud) configurationPackets(tower string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.configurationLocked(tower, c.logs[tower])
}

// serveStaleConfiguration makes the cloud answer packets (signed earlier) for the tower's
// configuration, as a replayed answer would.
func (c *fakeCloud) serveStaleConfiguration(tower string, packets []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logs[tower].staleConfig = packets
}

func (c *fakeCloud) configurationLocked(tower string, l *fakeLog) []string {
	var cmds []towerproto.Command
	for _, id := range slices.Sorted(maps.Keys(l.generations)) {
		state := uint64(0)
		if l.outOfService[id] {
			state = 1
		}
		cmds = append(cmds,
			towerproto.Command{Kind: towerproto.CommandGenerationFloor, Arg1: uint64(id), Arg2: uint64(l.generations[id])},
			towerproto.Command{Kind: towerproto.CommandServiceState, Arg1: uint64(id), Arg2: state})
	}
	payload, auth, err := towerproto.EncodeCommands(towerproto.CommandBatch{TowerID: tower, Number: uint64(len(l.commands)),
		Snapshot: true, ExpiresAt: c.signedAt().Add(commandTTL), Commands: cmds}, towerproto.CommandKey(c.secrets[tower]))
	if err != nil {
		c.t.Errorf("fake cloud: encode configuration: %v", err)
		return nil
	}
	return []string{hex.EncodeToString(append(payload, auth...))}
}

func (c *fakeCloud) handleConfiguration(w http.ResponseWriter, r *http.Request) {
	tower := strings.ToLower(r.PathValue("tower"))
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.logs[tower]
	if l == nil || len(l.generations) == 0 {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"status":404,"detail":"no configuration"}`)
		return
	}
	packets := l.staleConfig
	if packets == nil {
		packets = c.configurationLocked(tower, l)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"towerId": r.PathValue("tower"), "commands": packets})
}

// handleCommands answers the commands after the acknowledged position, 64 to a batch.
func (c *fakeCloud) handleCommands(w http.ResponseWriter, r *http.Request) {
	tower := strings.ToLower(r.PathValue("tower"))
	c.mu.Lock()
	defer c.mu.Unlock()
	type batch struct {
		TowerID          string `json:"towerId"`
		SyncCommandStart uint64 `json:"syncCommandStart"`
		SyncCommandCount int    `json:"syncCommandCount"`
		Payload          string `json:"payload"`
		PayloadAuth      string `json:"payloadAuth"`
	}
	out := []batch{}
	if l := c.logs[tower]; l != nil {
		pending := l.commands[l.acked:]
		for i, chunk := 0, slices.Collect(slices.Chunk(pending, 64)); i < len(chunk); i++ {
			first := l.acked + 1 + uint64(i*64)
			payload, auth, err := towerproto.EncodeCommands(towerproto.CommandBatch{TowerID: tower, Number: first,
				ExpiresAt: c.signedAt().Add(commandTTL), Commands: chunk[i]}, towerproto.CommandKey(c.secrets[tower]))
			if err != nil {
				c.fail(w, "encode commands: %v", err)
				return
			}
			out = append(out, batch{TowerID: r.PathValue("tower"), SyncCommandStart: first, SyncCommandCount: len(chunk[i]),
				Payload: hex.EncodeToString(payload), PayloadAuth: hex.EncodeToString(auth)})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (c *fakeCloud) handleResetEvents(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Reason string `json:"reason"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		c.fail(w, "decode reset report: %v", err)
		return
	}
	tower := strings.ToLower(r.PathValue("tower"))
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.logs[tower]
	if l == nil {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	l.resets = append(l.resets, req.Reason)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":%q,"name":"Tower","description":"","systemId":%q,"towerModelId":1,"locationId":1,"pinCode":"","accessModeId":1,"isForTest":true}`,
		r.PathValue("tower"), tower)
}
