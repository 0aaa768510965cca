package store_test

import (
	"context"
	"crypto/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
)

// gatewayFixture is a seeded database with GW-0001 registered at Downtown Hub.
func gatewayFixture(t *testing.T) (*store.Store, seed.Result, store.Gateway) {
	t.Helper()
	st, res := seeded(t)
	g, err := st.UpsertGateway(context.Background(), store.NewGateway{Serial: "GW-0001", LocationID: res.GatewayLocationID["GW-0001"],
		BaseURL: "http://127.0.0.1:1", SecretSealed: []byte("sealed")})
	require.NoError(t, err)
	return st, res, g
}

// issuedGatewayKey is gatewayFixture's store with a gateway key issued to the seeded
// organization: with its own rate limit, or the default one when limit is 0.
func issuedGatewayKey(t *testing.T, label string, limit int) (*store.Store, string, store.GatewayKey) {
	t.Helper()
	st, res, _ := gatewayFixture(t)
	var override *int
	if limit != 0 {
		override = &limit
	}
	key, k, err := st.IssueGatewayKey(context.Background(), res.Credentials.OrganizationID, label, override)
	require.NoError(t, err)
	return st, key, k
}

// authorize authorizes one request with key (default limit 120 a minute).
func authorize(t *testing.T, st *store.Store, key string) store.KeyAuthorization {
	t.Helper()
	a, err := st.AuthorizeGatewayKey(context.Background(), credential.Hash(key), 120)
	require.NoError(t, err)
	return a
}

func TestAuthorizeGatewayKeyIsARollingLimit(t *testing.T) {
	t.Parallel()
	st, key, k := issuedGatewayKey(t, "t", 3)
	ctx := context.Background()

	for want := 2; want >= 0; want-- {
		a := authorize(t, st, key)
		assert.True(t, a.Allowed)
		assert.Equal(t, 3, a.Limit, "the key's override")
		assert.Equal(t, want, a.Remaining())
		assert.Equal(t, k.ID, a.KeyID)
		assert.Equal(t, seed.OrganizationName, a.OrganizationName)
	}
	a := authorize(t, st, key)
	assert.False(t, a.Allowed)
	assert.Equal(t, 0, a.Remaining())
	assert.True(t, a.RetryAfter() > 0 && a.RetryAfter() <= 20*time.Second, "one request back every 20 s: %s", a.RetryAfter())
	assert.True(t, a.ResetAt().After(a.At))

	// Refused requests are not counted: a minute later (moved back in the state rather than
	// waited for) the whole allowance is back, not less.
	_, err := st.Pool().Exec(ctx, `UPDATE gateway_rate_limits SET tat = tat - interval '60 seconds' WHERE key_id = $1`, k.ID)
	require.NoError(t, err)
	a = authorize(t, st, key)
	assert.True(t, a.Allowed)
	assert.Equal(t, 2, a.Remaining())

	// Half a minute refills half of it.
	for range 2 {
		authorize(t, st, key)
	}
	_, err = st.Pool().Exec(ctx, `UPDATE gateway_rate_limits SET tat = tat - interval '40 seconds' WHERE key_id = $1`, k.ID)
	require.NoError(t, err)
	a = authorize(t, st, key)
	assert.True(t, a.Allowed)
	assert.Equal(t, 1, a.Remaining(), "40 s gave two requests back, this one used one")
}

func TestAuthorizeGatewayKeyDefaultsAndRefusals(t *testing.T) {
	t.Parallel()
	st, key, k := issuedGatewayKey(t, "", 0)
	ctx := context.Background()
	a := authorize(t, st, key)
	assert.Equal(t, 120, a.Limit)
	assert.Equal(t, 119, a.Remaining())
	assert.Equal(t, key[:12], a.KeyPrefix)

	_, err := st.AuthorizeGatewayKey(ctx, credential.Hash(credential.NewGatewayKey()), 120)
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.RevokeGatewayKey(ctx, k.ID)
	require.NoError(t, err)
	_, err = st.AuthorizeGatewayKey(ctx, credential.Hash(key), 120)
	assert.ErrorIs(t, err, store.ErrNotFound, "revoked")
	_, err = st.RevokeGatewayKey(ctx, uuid.New())
	assert.ErrorIs(t, err, store.ErrNotFound)
}

func TestAuthorizeGatewayKeyConcurrently(t *testing.T) {
	t.Parallel()
	st, key, _ := issuedGatewayKey(t, "t", 10)
	ctx := context.Background()
	var allowed atomic.Int64
	began := time.Now()
	testenv.AtOnce(40, func(int) {
		a, err := st.AuthorizeGatewayKey(ctx, credential.Hash(key), 120)
		if assert.NoError(t, err) && a.Allowed {
			allowed.Add(1)
		}
	})
	refill := int64(time.Since(began) / (6 * time.Second))
	assert.GreaterOrEqual(t, allowed.Load(), int64(10))
	assert.LessOrEqual(t, allowed.Load(), 10+refill, "one statement per request keeps the count exact")
}

func newRequest(res seed.Result, g store.Gateway, kind string) store.NewGatewayRequest {
	return store.NewGatewayRequest{ID: uuid.New(), OrganizationID: res.Credentials.OrganizationID, LocationID: g.LocationID,
		GatewayID: g.ID, GatewaySerial: g.Serial, Kind: kind, Class: "hardware", Method: "POST",
		Path: "/api/customer/v1/locations/1/lockers/101/open", GatewayPath: "/lockers/101/open"}
}

// createRequest stores r with no idempotency key.
func createRequest(t *testing.T, st *store.Store, r store.NewGatewayRequest) store.GatewayRequest {
	t.Helper()
	got, _, err := st.CreateGatewayRequest(context.Background(), r, nil)
	require.NoError(t, err)
	return got
}

// beginSend begins the request's send number n.
func beginSend(t *testing.T, st *store.Store, id uuid.UUID, n int) store.GatewaySend {
	t.Helper()
	s, err := st.BeginGatewaySend(context.Background(), id, n)
	require.NoError(t, err)
	return s
}

func TestCreateGatewayRequestWithIdempotencyKeys(t *testing.T) {
	t.Parallel()
	st, res, g := gatewayFixture(t)
	ctx := context.Background()
	claim := &store.IdempotencyClaim{Key: "k1", Hash: []byte("hash-a"), TTL: time.Hour}

	first, created, err := st.CreateGatewayRequest(ctx, newRequest(res, g, "open-locker"), claim)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, "pending", first.Status)

	again, created, err := st.CreateGatewayRequest(ctx, newRequest(res, g, "open-locker"), claim)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, first.ID, again.ID)

	_, _, err = st.CreateGatewayRequest(ctx, newRequest(res, g, "open-locker"), &store.IdempotencyClaim{Key: "k1", Hash: []byte("hash-b"), TTL: time.Hour})
	assert.ErrorIs(t, err, store.ErrIdempotencyKeyReused)

	// An expired key is free again.
	_, err = st.Pool().Exec(ctx, `UPDATE gateway_idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = 'k1'`)
	require.NoError(t, err)
	fresh, created, err := st.CreateGatewayRequest(ctx, newRequest(res, g, "open-locker"), &store.IdempotencyClaim{Key: "k1", Hash: []byte("hash-b"), TTL: time.Hour})
	require.NoError(t, err)
	assert.True(t, created)
	assert.NotEqual(t, first.ID, fresh.ID)

	// Concurrent first requests with one key: one creates, the others find it.
	var creates atomic.Int64
	ids := make([]uuid.UUID, 20)
	testenv.AtOnce(len(ids), func(i int) {
		r, created, err := st.CreateGatewayRequest(ctx, newRequest(res, g, "open-locker"), &store.IdempotencyClaim{Key: "race", Hash: []byte("h"), TTL: time.Hour})
		if !assert.NoError(t, err) {
			return
		}
		if created {
			creates.Add(1)
		}
		ids[i] = r.ID
	})
	assert.Equal(t, int64(1), creates.Load())
	var one uuid.UUID
	for _, id := range ids {
		if one == uuid.Nil {
			one = id
		}
		assert.Equal(t, one, id)
	}
	var n int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM gateway_requests`).Scan(&n))
	assert.Equal(t, 3, n, "first, fresh and the race's one")
}

// A proxied call's key check, count and stored request in one round trip: stored only for a
// valid key within its limit, at its organization's gateway, with the Idempotency-Key rules
// of CreateGatewayRequest.
func TestAuthorizeAndCreateGatewayRequest(t *testing.T) {
	t.Parallel()
	st, res, g := gatewayFixture(t)
	ctx := context.Background()
	limit := 3
	key, k, err := st.IssueGatewayKey(ctx, res.Credentials.OrganizationID, "t", &limit)
	require.NoError(t, err)
	hash := credential.Hash(key)
	count := func() int {
		var n int
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM gateway_requests`).Scan(&n))
		return n
	}
	nr := newRequest(res, g, "open-locker")
	nr.OrganizationID, nr.GatewayID, nr.GatewaySerial = 0, 0, "" // the key's, the location's

	a, r, gw, created, err := st.AuthorizeAndCreateGatewayRequest(ctx, hash, 120, nr, nil)
	require.NoError(t, err)
	assert.True(t, a.Allowed)
	assert.Equal(t, 2, a.Remaining())
	assert.Equal(t, k.ID, a.KeyID)
	assert.True(t, created)
	assert.Equal(t, g.ID, gw.ID)
	assert.Equal(t, "http://127.0.0.1:1", gw.BaseURL)
	assert.Equal(t, res.Credentials.OrganizationID, r.OrganizationID)
	assert.Equal(t, g.ID, r.GatewayID)
	assert.Equal(t, g.Serial, r.GatewaySerial)
	assert.Equal(t, "pending", r.Status)

	// Idempotency-Key: the second call finds the first request (and is counted).
	claim := &store.IdempotencyClaim{Key: "keyed", Hash: []byte("h"), TTL: time.Hour}
	nr.ID = uuid.New()
	_, first, _, created, err := st.AuthorizeAndCreateGatewayRequest(ctx, hash, 120, nr, claim)
	require.NoError(t, err)
	require.True(t, created)
	nr.ID = uuid.New()
	a, again, _, created, err := st.AuthorizeAndCreateGatewayRequest(ctx, hash, 120, nr, claim)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, first.ID, again.ID)
	assert.Equal(t, 0, a.Remaining())
	require.Equal(t, 2, count())

	// Over the limit: refused, not counted, nothing stored.
	nr.ID = uuid.New()
	a, r, _, created, err = st.AuthorizeAndCreateGatewayRequest(ctx, hash, 120, nr, nil)
	require.NoError(t, err)
	assert.False(t, a.Allowed)
	assert.False(t, created)
	assert.Equal(t, uuid.Nil, r.ID)
	assert.Equal(t, 2, count())

	// An unknown or revoked key: ErrKeyNotFound, nothing stored.
	other, _, err := st.IssueGatewayKey(ctx, res.Credentials.OrganizationID, "other", nil)
	require.NoError(t, err)
	_, _, _, _, err = st.AuthorizeAndCreateGatewayRequest(ctx, credential.Hash(credential.NewGatewayKey()), 120, nr, nil)
	assert.ErrorIs(t, err, store.ErrKeyNotFound)
	_, err = st.RevokeGatewayKeyByPrefix(ctx, other[:12])
	require.NoError(t, err)
	_, _, _, _, err = st.AuthorizeAndCreateGatewayRequest(ctx, credential.Hash(other), 120, nr, nil)
	assert.ErrorIs(t, err, store.ErrKeyNotFound)
	assert.Equal(t, 2, count())

	// A location without a gateway of the key's organization: ErrNotFound, counted, nothing stored.
	third, _, err := st.IssueGatewayKey(ctx, res.Credentials.OrganizationID, "third", nil)
	require.NoError(t, err)
	nr.LocationID = 999999
	a, _, _, _, err = st.AuthorizeAndCreateGatewayRequest(ctx, credential.Hash(third), 120, nr, nil)
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.NotErrorIs(t, err, store.ErrKeyNotFound)
	assert.True(t, a.Allowed)
	assert.Equal(t, 2, count())

	// A waiting read is stored pending for its workflow and counted like any request; its
	// commit skips the WAL flush for that transaction only: no connection of the pool keeps
	// synchronous_commit off.
	nr = newRequest(res, g, "get-locker")
	nr.OrganizationID, nr.GatewayID, nr.GatewaySerial = 0, 0, ""
	nr.Class, nr.Method, nr.GatewayPath, nr.Waits = "read", "GET", "/lockers/101", true
	a, r, _, created, err = st.AuthorizeAndCreateGatewayRequest(ctx, credential.Hash(third), 120, nr, nil)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, "pending", r.Status)
	assert.Zero(t, r.Attempts)
	assert.Equal(t, a.Limit-2, a.Remaining())
	assert.Equal(t, 3, count())
	conns := st.Pool().AcquireAllIdle(ctx)
	require.NotEmpty(t, conns)
	for _, c := range conns {
		var sc string
		require.NoError(t, c.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&sc))
		assert.Equal(t, "on", sc)
		c.Release()
	}
}

func TestGatewaySendsAreNumberedAndFinishingIsFinal(t *testing.T) {
	t.Parallel()
	st, res, g := gatewayFixture(t)
	ctx := context.Background()
	r := createRequest(t, st, newRequest(res, g, "open-locker"))

	s := beginSend(t, st, r.ID, 1)
	assert.True(t, s.Began)
	assert.Equal(t, 1, s.Attempts)
	assert.Equal(t, "GW-0001", s.Gateway.Serial)
	assert.Equal(t, "http://127.0.0.1:1", s.Gateway.BaseURL)

	s = beginSend(t, st, r.ID, 1)
	assert.False(t, s.Began, "the same send again may have been delivered")
	assert.Equal(t, 1, s.Attempts)

	// A send that never got out may go again.
	require.NoError(t, st.AbandonGatewaySend(ctx, r.ID, 1))
	got, err := st.GatewayRequest(ctx, res.Credentials.OrganizationID, r.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", got.Status)
	s = beginSend(t, st, r.ID, 1)
	assert.True(t, s.Began)
	assert.Equal(t, 2, s.Attempts)

	s = beginSend(t, st, r.ID, 2)
	assert.True(t, s.Began)
	got, err = st.GatewayRequest(ctx, res.Credentials.OrganizationID, r.ID)
	require.NoError(t, err)
	assert.Equal(t, "dispatched", got.Status)
	assert.Equal(t, 3, got.Attempts)

	done, err := st.FinishGatewayRequest(ctx, r.ID, 0, gatewayreq.Outcome{Status: "completed", HTTPStatus: 200,
		Headers: map[string]string{"Content-Type": "application/json"}, Body: []byte(`{"doorOpen":true}`)}, store.GatewaySeenAnswered, true)
	require.NoError(t, err)
	require.NotNil(t, done.CompletedAt)
	assert.Equal(t, "completed", done.Status)

	again, err := st.FinishGatewayRequest(ctx, r.ID, 0, gatewayreq.Outcome{Status: "rejected", HTTPStatus: 502, ErrorCode: "X"}, store.GatewaySeenUnknown, false)
	require.NoError(t, err)
	assert.Equal(t, "completed", again.Status, "the first outcome stays")
	assert.Equal(t, []byte(`{"doorOpen":true}`), again.Outcome.Body)
	assert.Equal(t, "application/json", again.Outcome.Headers["Content-Type"])

	_, err = st.BeginGatewaySend(ctx, r.ID, 3)
	assert.ErrorIs(t, err, store.ErrNotFound, "a terminal request sends nothing")

	// The outcome told the gateway's health and asked for a mirror refresh.
	gw, err := st.GatewayByID(ctx, g.ID)
	require.NoError(t, err)
	require.NotNil(t, gw.Online)
	assert.True(t, *gw.Online)
	assert.NotNil(t, gw.LastSeenAt)
	due, err := st.ClaimDueGatewaySyncs(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, due, 1)

	// Another organization cannot read it.
	other := ensureOrg(t, st, "Someone Else")
	_, err = st.GatewayRequest(ctx, other.ID, r.ID)
	assert.ErrorIs(t, err, store.ErrNotFound)
}

// Gateway requests go with their month, dropped whole past the retention, never row by row:
// the prune deletes expired idempotency keys and, once a request's month is gone, its id
// claim. A month holding an open request is not dropped. Until its claim goes, an id is still
// taken.
func TestPruneGatewayRequests(t *testing.T) {
	t.Parallel()
	st, res, g := gatewayFixture(t)
	ctx := context.Background()
	old := createRequest(t, st, newRequest(res, g, "list-lockers"))
	keyed, _, err := st.CreateGatewayRequest(ctx, newRequest(res, g, "open-locker"), &store.IdempotencyClaim{Key: "kept", Hash: []byte("h"), TTL: time.Hour})
	require.NoError(t, err)
	pending := createRequest(t, st, newRequest(res, g, "open-locker"))
	recent := createRequest(t, st, newRequest(res, g, "list-lockers"))
	for _, id := range []uuid.UUID{old.ID, keyed.ID, recent.ID} {
		_, err := st.FinishGatewayRequest(ctx, id, 0, gatewayreq.Outcome{Status: "completed", HTTPStatus: 200}, store.GatewaySeenUnknown, false)
		require.NoError(t, err)
	}
	// Three of them made 100 days ago: into that month's partition (their id claims follow).
	then := time.Now().AddDate(0, 0, -100)
	_, err = st.EnsurePartitions(ctx, store.HistoryGatewayRequests, then, then)
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `UPDATE gateway_requests SET created_at = $1 WHERE id = ANY ($2)`,
		then, []uuid.UUID{old.ID, keyed.ID, pending.ID})
	require.NoError(t, err)

	keys, claims, err := st.PruneGatewayRequests(ctx, 30*24*time.Hour)
	require.NoError(t, err)
	assert.Zero(t, keys)
	assert.Zero(t, claims, "no request is pruned row by row")
	for _, id := range []uuid.UUID{old.ID, keyed.ID, pending.ID, recent.ID} {
		r, err := st.GatewayRequestByID(ctx, id)
		require.NoError(t, err, "found by id in its month")
		assert.Equal(t, id, r.ID)
	}

	cutoff := time.Now().Add(-30 * 24 * time.Hour)
	dropped, err := st.DropPartitions(ctx, store.HistoryGatewayRequests, cutoff)
	require.ErrorIs(t, err, store.ErrPartitionHeld, "an open request holds its month")
	assert.Empty(t, dropped)
	_, err = st.FinishGatewayRequest(ctx, pending.ID, 0, gatewayreq.Outcome{Status: "completed", HTTPStatus: 200}, store.GatewaySeenUnknown, false)
	require.NoError(t, err)
	dropped, err = st.DropPartitions(ctx, store.HistoryGatewayRequests, cutoff)
	require.NoError(t, err)
	assert.Equal(t, []string{"gateway_requests_p" + then.UTC().Format("200601")}, dropped)
	for _, id := range []uuid.UUID{old.ID, keyed.ID, pending.ID} {
		_, err := st.GatewayRequestByID(ctx, id)
		assert.ErrorIs(t, err, store.ErrNotFound, "gone with its month")
	}
	_, err = st.GatewayRequestByID(ctx, recent.ID)
	require.NoError(t, err, "this month's request stays")

	// The id claims outlive their requests: an id is still taken until the prune.
	again := newRequest(res, g, "list-lockers")
	again.ID = old.ID
	_, _, err = st.CreateGatewayRequest(ctx, again, nil)
	require.ErrorIs(t, err, store.ErrConflict)

	_, err = st.Pool().Exec(ctx, `UPDATE gateway_idempotency_keys SET expires_at = now() - interval '1 second'`)
	require.NoError(t, err)
	keys, claims, err = st.PruneGatewayRequests(ctx, 30*24*time.Hour)
	require.NoError(t, err)
	assert.Equal(t, int64(1), keys)
	assert.Equal(t, int64(3), claims, "the claims of the three requests dropped with their month")
	_, err = st.GatewayRequestByID(ctx, recent.ID)
	assert.NoError(t, err)
}

func TestListenGatewayOutcomes(t *testing.T) {
	t.Parallel()
	st, res, g := gatewayFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	got := make(chan uuid.UUID, 4)
	done := make(chan error, 1)
	go func() {
		done <- st.ListenGatewayOutcomes(ctx, func() { close(ready) }, func(id uuid.UUID) { got <- id })
	}()
	<-ready

	r, _, err := st.CreateGatewayRequest(context.Background(), newRequest(res, g, "list-lockers"), nil)
	require.NoError(t, err)
	_, err = st.FinishGatewayRequest(context.Background(), r.ID, 0, gatewayreq.Outcome{Status: "completed", HTTPStatus: 200}, store.GatewaySeenUnknown, false)
	require.NoError(t, err)
	select {
	case id := <-got:
		assert.Equal(t, r.ID, id)
	case <-time.After(30 * time.Second):
		t.Fatal("no announcement")
	}
	// A second finish changes nothing and announces nothing.
	_, err = st.FinishGatewayRequest(context.Background(), r.ID, 0, gatewayreq.Outcome{Status: "rejected", HTTPStatus: 502}, store.GatewaySeenUnknown, false)
	require.NoError(t, err)
	cancel()
	assert.Error(t, <-done)
	assert.Empty(t, got)
}

// The demo seed keeps its gateway cloud key across re-runs, and replaces one that stopped
// working.
func TestSeedKeepsTheGatewayKey(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	master := make([]byte, keyring.KeySize)
	_, _ = rand.Read(master)
	ring, err := keyring.New(master)
	require.NoError(t, err)
	res, err := seed.Demo(ctx, st, ring, nil)
	require.NoError(t, err)
	key := res.Credentials.GatewayAPIKey
	require.True(t, credential.IsGatewayKey(key))
	k, err := st.ActiveGatewayKeyByHash(ctx, credential.Hash(key))
	require.NoError(t, err)
	assert.Equal(t, res.Credentials.OrganizationID, k.OrganizationID)

	again, err := seed.Demo(ctx, st, ring, &res.Credentials)
	require.NoError(t, err)
	assert.Equal(t, key, again.Credentials.GatewayAPIKey)

	_, err = st.RevokeGatewayKey(ctx, k.ID)
	require.NoError(t, err)
	fresh, err := seed.Demo(ctx, st, ring, &again.Credentials)
	require.NoError(t, err)
	assert.NotEqual(t, key, fresh.Credentials.GatewayAPIKey)
	_, err = st.ActiveGatewayKeyByHash(ctx, credential.Hash(fresh.Credentials.GatewayAPIKey))
	assert.NoError(t, err)
}

// A request keeps what it concerns (its subject) from creation to outcome, and its spec
// rebuilds the workflow input from the row.
func TestGatewayRequestSubject(t *testing.T) {
	t.Parallel()
	st, res, g := gatewayFixture(t)
	ctx := context.Background()
	codeID := uuid.NewString()
	nr := newRequest(res, g, "access-code-open")
	nr.GatewayPath, nr.Subject = "/transactions/"+codeID+"/open", codeID
	r, _, err := st.CreateGatewayRequest(ctx, nr, nil)
	require.NoError(t, err)
	assert.Equal(t, codeID, r.Subject)

	done, err := st.FinishGatewayRequest(ctx, r.ID, 0, gatewayreq.Outcome{Status: "completed", HTTPStatus: 200}, store.GatewaySeenUnknown, false)
	require.NoError(t, err)
	assert.Equal(t, codeID, done.Subject)
	got, err := st.GatewayRequestByID(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, codeID, got.Subject)

	cloud := createRequest(t, st, newRequest(res, g, "open-locker"))
	assert.Empty(t, cloud.Subject, "the cloud API's requests have none")

	policy := gatewayreq.Policy{CallTimeout: time.Second}
	assert.Equal(t, gatewayreq.Spec{RequestID: r.ID.String(), OrganizationID: r.OrganizationID, LocationID: r.LocationID,
		GatewayID: r.GatewayID, GatewaySerial: r.GatewaySerial, Kind: "access-code-open", Class: "hardware", Method: "POST",
		Path: "/transactions/" + codeID + "/open", Policy: policy, Revision: gatewayreq.RevisionCurrent}, r.Spec(policy))
}

func TestGatewayAnswerBodyIsStoredWithItsSend(t *testing.T) {
	t.Parallel()
	st, res, g := gatewayFixture(t)
	ctx := context.Background()
	r := createRequest(t, st, newRequest(res, g, "open-locker"))
	beginSend(t, st, r.ID, 1)

	// Only the send in flight stores its answer.
	assert.ErrorIs(t, st.StoreGatewayAnswer(ctx, r.ID, 2, []byte(`{}`)), store.ErrNotFound)
	require.NoError(t, st.StoreGatewayAnswer(ctx, r.ID, 1, []byte(`{"doorOpen":false}`)))
	beginSend(t, st, r.ID, 2)
	require.NoError(t, st.StoreGatewayAnswer(ctx, r.ID, 2, []byte(`{"doorOpen":true}`)))

	// The outcome takes the last answer's body, which is then kept once.
	done, err := st.FinishGatewayRequest(ctx, r.ID, res.Credentials.OrganizationID, gatewayreq.Outcome{Status: "completed", HTTPStatus: 200,
		Headers: map[string]string{"Content-Type": "application/json"}, BodyInStore: true}, store.GatewaySeenAnswered, false)
	require.NoError(t, err)
	assert.Equal(t, []byte(`{"doorOpen":true}`), done.Outcome.Body)
	got, err := st.GatewayRequest(ctx, res.Credentials.OrganizationID, r.ID)
	require.NoError(t, err)
	assert.Equal(t, []byte(`{"doorOpen":true}`), got.Outcome.Body)
	var left int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM gateway_requests WHERE answer_body IS NOT NULL OR answer_send IS NOT NULL`).Scan(&left))
	assert.Zero(t, left)

	// A settled request stores no answer.
	assert.ErrorIs(t, st.StoreGatewayAnswer(ctx, r.ID, 2, []byte(`{}`)), store.ErrNotFound)

	// An empty answer is an empty body, not a missing one.
	r2 := createRequest(t, st, newRequest(res, g, "open-locker"))
	beginSend(t, st, r2.ID, 1)
	require.NoError(t, st.StoreGatewayAnswer(ctx, r2.ID, 1, nil))
	done, err = st.FinishGatewayRequest(ctx, r2.ID, res.Credentials.OrganizationID, gatewayreq.Outcome{Status: "completed", HTTPStatus: 204,
		BodyInStore: true}, store.GatewaySeenAnswered, false)
	require.NoError(t, err)
	assert.NotNil(t, done.Outcome.Body)
	assert.Empty(t, done.Outcome.Body)
}
