package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/lockernet/lockernet/internal/gatewayreq"
)

// ErrIdempotencyKeyReused means an idempotency key already stands for a request with another
// method, path or body.
var ErrIdempotencyKeyReused = errors.New("idempotency key reused with another request")

// NewGatewayRequest is a proxied call accepted by the gateway cloud API.
type NewGatewayRequest struct {
	ID             uuid.UUID
	OrganizationID int64
	LocationID     int64
	GatewayID      int64
	GatewaySerial  string
	Kind           string
	Class          string
	Method         string
	// Path is the cloud path the caller used; GatewayPath the local-API path it maps to.
	Path        string
	GatewayPath string
	Body        []byte
	// Subject is what the request concerns, for what follows from its outcome: the access
	// code's id (an access-code hold, open or release), the gateway locker's id (an
	// access-code close); empty for the cloud API's requests.
	Subject string
	// Waits says the caller waits for the request's answer (not respond-async, not wait=0):
	// a waiting read's commit does not wait for its WAL flush (decision 0011).
	Waits bool
}

// IdempotencyClaim binds an Idempotency-Key to the request being created.
type IdempotencyClaim struct {
	Key  string
	Hash []byte
	TTL  time.Duration
}

// GatewayRequest is a stored gateway request with its outcome once terminal.
type GatewayRequest struct {
	NewGatewayRequest
	Status   string
	Attempts int
	// LastSend is the number of the workflow's latest send begun (0: none, or the first
	// one never reached the gateway): gatewayreq.FirstSendOut reads it.
	LastSend    int
	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt *time.Time
	Outcome     gatewayreq.Outcome
}

// Terminal reports whether the request has its outcome.
func (r GatewayRequest) Terminal() bool { return r.CompletedAt != nil }

// Result is a terminal request's outcome as its workflow reports it (zero CompletedAt while
// it has none).
func (r GatewayRequest) Result() gatewayreq.Result {
	res := gatewayreq.Result{Outcome: r.Outcome, Attempts: r.Attempts, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.CompletedAt != nil {
		res.CompletedAt = *r.CompletedAt
	}
	return res
}

// WithResult is the request with the outcome its workflow reported, as FinishGatewayRequest
// stored it.
func (r GatewayRequest) WithResult(res gatewayreq.Result) GatewayRequest {
	completed := res.CompletedAt
	r.Status, r.Outcome, r.Attempts, r.UpdatedAt, r.CompletedAt = res.Outcome.Status, res.Outcome, res.Attempts, res.UpdatedAt, &completed
	return r
}

// Spec is the input of the request's workflow, dispatched under policy p.
func (r GatewayRequest) Spec(p gatewayreq.Policy) gatewayreq.Spec {
	return gatewayreq.Spec{
		RequestID: r.ID.String(), OrganizationID: r.OrganizationID, LocationID: r.LocationID,
		GatewayID: r.GatewayID, GatewaySerial: r.GatewaySerial, Kind: r.Kind, Class: r.Class,
		Method: r.Method, Path: r.GatewayPath, Body: r.Body, Policy: p, Revision: gatewayreq.RevisionCurrent,
	}
}

const gatewayRequestColumns = `id, organization_id, location_id, gateway_id, gateway_serial, kind, class, method, path,
	gateway_path, request_body, coalesce(subject, ''), status, attempts, last_send, created_at, updated_at, completed_at,
	coalesce(http_status, 0), response_headers, response_body, coalesce(error_code, ''), coalesce(error_message, ''), details`

func scanGatewayRequest(row pgx.Row) (GatewayRequest, error) {
	var r GatewayRequest
	var headers, details []byte
	err := row.Scan(&r.ID, &r.OrganizationID, &r.LocationID, &r.GatewayID, &r.GatewaySerial, &r.Kind, &r.Class,
		&r.Method, &r.Path, &r.GatewayPath, &r.Body, &r.Subject, &r.Status, &r.Attempts, &r.LastSend, &r.CreatedAt, &r.UpdatedAt,
		&r.CompletedAt, &r.Outcome.HTTPStatus, &headers, &r.Outcome.Body, &r.Outcome.ErrorCode,
		&r.Outcome.ErrorMessage, &details)
	if err != nil {
		return GatewayRequest{}, err
	}
	r.Outcome.Status = r.Status
	if len(headers) > 0 {
		if err := json.Unmarshal(headers, &r.Outcome.Headers); err != nil {
			return GatewayRequest{}, fmt.Errorf("decode response headers: %w", err)
		}
	}
	if len(details) > 0 {
		if err := decodeJSONNumbers(details, &r.Outcome.Details); err != nil {
			return GatewayRequest{}, fmt.Errorf("decode details: %w", err)
		}
	}
	return r, nil
}

// decodeJSONNumbers keeps numbers as json.Number, so a stored outcome renders exactly as the
// live one did (no integer turned into a float).
func decodeJSONNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// CreateGatewayRequest stores a new gateway request at the gateway r names. With an
// idempotency claim it first takes the key for (organization, key): when a live key already
// stands for another request, nothing is created and that request is returned with created
// false, or ErrIdempotencyKeyReused if its hash differs. Concurrent first requests with one
// key serialise on the key's row, so exactly one of them creates a request. The claim and the
// request are one statement: one round trip, one commit.
func (s *Store) CreateGatewayRequest(ctx context.Context, r NewGatewayRequest, idem *IdempotencyClaim) (GatewayRequest, bool, error) {
	out, err := scanGatewayRequest(s.db.QueryRow(ctx, createGatewayRequestSQL, append(createGatewayRequestArgs(r, idem), nil)...))
	return s.createdGatewayRequest(ctx, r, idem, out, err)
}

// AuthorizeAndCreateGatewayRequest checks a presented key and counts it against its rate
// limit (AuthorizeGatewayKey's statement), finds the enabled gateway of r's location for the
// key's organization and stores the request there with its Idempotency-Key claim
// (CreateGatewayRequest's statement; r.OrganizationID, r.GatewayID and r.GatewaySerial are
// ignored): one batch, so one round trip and one implicit transaction, one commit. The
// request is stored only when the key is valid and within its limit. ErrKeyNotFound means
// the key is unknown or revoked; a key over its limit returns its KeyAuthorization (Allowed
// false) and nothing else; ErrNotFound, a location without such a gateway. The key's
// rate-limit row stays locked until the commit, so one key's proxied calls are counted and
// stored one after the other.
func (s *Store) AuthorizeAndCreateGatewayRequest(ctx context.Context, keyHash []byte, defaultLimit int, r NewGatewayRequest,
	idem *IdempotencyClaim) (KeyAuthorization, GatewayRequest, Gateway, bool, error) {
	if keyHash == nil {
		keyHash = []byte{}
	}
	r.OrganizationID, r.GatewayID, r.GatewaySerial = 0, 0, ""
	b := &pgx.Batch{}
	noFlush := r.Class == gatewayreq.ClassRead && r.Waits
	if noFlush {
		// A read whose caller waits for its answer: the commit does not wait for its WAL
		// flush. Nothing of it must survive a Postgres crash: a read may be sent again
		// (DESIGN §6.2), a lost rate-limit count is harmless, and the caller's answer waits
		// for the outcome's commit, which flushes the WAL up to and past this one (or, after
		// a wait ran out, is given long after the WAL writer flushed it, within 3 ×
		// wal_writer_delay). A respond-async read answers 202 naming the row at once, so it
		// waits for the flush like every write.
		b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
	}
	b.Queue(authorizeGatewayKeySQL, keyHash, defaultLimit)
	b.Queue(`SELECT `+gatewayColumns+` FROM gateways g JOIN gateway_api_keys k ON k.organization_id = g.organization_id
		WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND g.location_id = $2 AND g.disabled_at IS NULL`, keyHash, r.LocationID)
	b.Queue(createGatewayRequestSQL, append(createGatewayRequestArgs(r, idem), keyHash)...)
	res := s.db.SendBatch(ctx, b)
	var serr error
	if noFlush {
		_, serr = res.Exec()
	}
	var auth KeyAuthorization
	aerr := scanKeyAuthorization(res.QueryRow(), &auth)
	if aerr == nil && serr != nil {
		aerr = serr
	}
	gw, gerr := scanGateway(res.QueryRow())
	out, err := scanGatewayRequest(res.QueryRow())
	cerr := res.Close()
	switch {
	case errors.Is(aerr, pgx.ErrNoRows):
		return KeyAuthorization{}, GatewayRequest{}, Gateway{}, false, ErrKeyNotFound
	case aerr != nil:
		return KeyAuthorization{}, GatewayRequest{}, Gateway{}, false, fmt.Errorf("authorize gateway key: %w", translate(aerr))
	case !auth.Allowed:
		return auth, GatewayRequest{}, Gateway{}, false, nil
	case gerr != nil:
		return auth, GatewayRequest{}, Gateway{}, false, fmt.Errorf("get gateway of location: %w", translate(gerr))
	case err == nil && cerr != nil:
		err = cerr
	}
	r.OrganizationID = auth.OrganizationID
	row, created, err := s.createdGatewayRequest(ctx, r, idem, out, err)
	return auth, row, gw, created, err
}

// ErrKeyNotFound means a presented gateway cloud API key is unknown or revoked.
var ErrKeyNotFound = fmt.Errorf("gateway key: %w", ErrNotFound)

// createdGatewayRequest finishes a create: the request stored, or, when the statement
// stored nothing because the Idempotency-Key stands for another request, that request.
func (s *Store) createdGatewayRequest(ctx context.Context, r NewGatewayRequest, idem *IdempotencyClaim, out GatewayRequest,
	err error) (GatewayRequest, bool, error) {
	switch {
	case err == nil:
		return out, true, nil
	case idem == nil || !errors.Is(translate(err), ErrNotFound):
		return GatewayRequest{}, false, fmt.Errorf("create gateway request: %w", translate(err))
	}
	var hash []byte
	var existing uuid.UUID
	err = s.db.QueryRow(ctx, `SELECT request_hash, request_id FROM gateway_idempotency_keys
		WHERE organization_id = $1 AND key = $2`, r.OrganizationID, idem.Key).Scan(&hash, &existing)
	if err != nil {
		return GatewayRequest{}, false, fmt.Errorf("read idempotency key: %w", translate(err))
	}
	if !bytes.Equal(hash, idem.Hash) {
		return GatewayRequest{}, false, ErrIdempotencyKeyReused
	}
	out, err = s.GatewayRequest(ctx, r.OrganizationID, existing)
	return out, false, err
}

// createGatewayRequestSQL claims the Idempotency-Key ($13, none when empty) and stores the
// request, at the gateway $4 ($5 its serial) or, when $4 is 0, at the enabled gateway of the
// location; no row when the key stands for a live request already (or there is no such
// gateway). A key whose request expired is taken over. The request's id is claimed in
// gateway_request_ids with its created_at (an id used before is ErrConflict; see
// requestMonth); the key's row references that claim, checked at commit. The organization is $2, or, when $16 is a key's hash, the
// key's, and then only when the key's rate limit allowed this request (counted by the
// statement before, in the same transaction).
const createGatewayRequestSQL = `
	WITH who AS (
	    SELECT $2::bigint AS org WHERE $16::bytea IS NULL
	    UNION ALL
	    SELECT k.organization_id FROM gateway_api_keys k JOIN gateway_rate_limits rl ON rl.key_id = k.id
	    WHERE $16::bytea IS NOT NULL AND k.key_hash = $16 AND k.revoked_at IS NULL AND rl.allowed
	), g AS (
	    SELECT $4::bigint AS id, $5::text AS serial FROM who WHERE $4::bigint <> 0
	    UNION ALL
	    SELECT gw.id, gw.serial FROM gateways gw, who
	    WHERE $4::bigint = 0 AND gw.location_id = $3 AND gw.organization_id = who.org AND gw.disabled_at IS NULL
	), claim AS (
	    INSERT INTO gateway_idempotency_keys AS i (organization_id, key, request_hash, request_id, expires_at)
	    SELECT who.org, $13, $14, $1, now() + make_interval(secs => $15) FROM g, who WHERE $13 <> ''
	    ON CONFLICT (organization_id, key) DO UPDATE SET
	        request_hash = EXCLUDED.request_hash, request_id = EXCLUDED.request_id,
	        created_at = now(), expires_at = EXCLUDED.expires_at
	    WHERE i.expires_at <= now()
	    RETURNING request_id
	), ids AS (
	    INSERT INTO gateway_request_ids (id, created_at)
	    SELECT $1, now() FROM g, who
	    WHERE $13 = '' OR EXISTS (SELECT 1 FROM claim)
	    RETURNING id, created_at
	)
	INSERT INTO gateway_requests (id, organization_id, location_id, gateway_id, gateway_serial, kind, class,
	                              method, path, gateway_path, request_body, subject,
	                              status, attempts, last_send, created_at, updated_at)
	SELECT ids.id, who.org, $3, g.id, g.serial, $6, $7, $8, $9, $10, $11, nullif($12, ''), 'pending', 0, 0,
	       ids.created_at, ids.created_at
	FROM ids, g, who
	RETURNING ` + gatewayRequestColumns

func createGatewayRequestArgs(r NewGatewayRequest, idem *IdempotencyClaim) []any {
	var key string
	var hash []byte
	var ttl float64
	if idem != nil {
		key, hash, ttl = idem.Key, idem.Hash, idem.TTL.Seconds()
	}
	return []any{r.ID, r.OrganizationID, r.LocationID, r.GatewayID, r.GatewaySerial, r.Kind, r.Class,
		r.Method, r.Path, r.GatewayPath, r.Body, r.Subject, key, hash, ttl}
}

// requestMonth finds the one partition of gateway_requests that holds the request whose id
// is $1: its id claim (an index probe) gives its created_at, the partition key, so only that
// month's index is probed (run-time partition pruning) instead of every month's (migration
// 00036, decision 0013).
const requestMonth = `created_at = (SELECT created_at FROM gateway_request_ids WHERE id = $1)`

// GatewayRequest returns one of the organization's gateway requests; another
// organization's is ErrNotFound.
func (s *Store) GatewayRequest(ctx context.Context, orgID int64, id uuid.UUID) (GatewayRequest, error) {
	r, err := scanGatewayRequest(s.db.QueryRow(ctx, `SELECT `+gatewayRequestColumns+`
		FROM gateway_requests WHERE id = $1 AND `+requestMonth+` AND organization_id = $2`, id, orgID))
	if err != nil {
		return GatewayRequest{}, fmt.Errorf("get gateway request: %w", translate(err))
	}
	return r, nil
}

// GatewayRequestByID returns a gateway request of any organization (workers, reconciler).
func (s *Store) GatewayRequestByID(ctx context.Context, id uuid.UUID) (GatewayRequest, error) {
	r, err := scanGatewayRequest(s.db.QueryRow(ctx, `SELECT `+gatewayRequestColumns+`
		FROM gateway_requests WHERE id = $1 AND `+requestMonth, id))
	if err != nil {
		return GatewayRequest{}, fmt.Errorf("get gateway request: %w", translate(err))
	}
	return r, nil
}

// StalledGatewayRequests lists open requests nobody carries: pending, never sent and older
// than olderThan (their workflow may never have started: the apiserver stopped between
// commit and start, or Temporal was away).
func (s *Store) StalledGatewayRequests(ctx context.Context, olderThan time.Duration, limit int) ([]GatewayRequest, error) {
	rows, err := s.db.Query(ctx, `SELECT `+gatewayRequestColumns+` FROM gateway_requests
		WHERE completed_at IS NULL AND status = 'pending' AND attempts = 0
		  AND created_at < now() - make_interval(secs => $1)
		ORDER BY created_at LIMIT $2`, olderThan.Seconds(), limit)
	return scanAll(rows, err, "list stalled gateway requests", "gateway request", nil, scanGatewayRequest)
}

// Id claims (gateway_request_ids) go in batches of idClaimBatch rows, at most idClaimBatches
// batches a pass: the rest waits for the next pass.
const (
	idClaimBatch   = 5000
	idClaimBatches = 100
)

// PruneGatewayRequests deletes expired idempotency keys, and the id claims of requests gone
// with their month (the history loop drops gateway_requests' months past their retention,
// never row by row): claims older than keep and than gateway_requests' oldest month whose
// request is no longer there. It returns how many keys and claims it deleted. A request's
// claim outlives it, never the other way round, so a lookup by id finds every request kept,
// and an id stays unique for as long as its request is kept and keep after.
func (s *Store) PruneGatewayRequests(ctx context.Context, keep time.Duration) (keys, claims int64, err error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM gateway_idempotency_keys WHERE expires_at <= now()`)
	if err != nil {
		return 0, 0, fmt.Errorf("prune idempotency keys: %w", translate(err))
	}
	keys = tag.RowsAffected()
	cutoff := time.Now().Add(-keep)
	st, err := s.HistoryStats(ctx, HistoryGatewayRequests)
	if err != nil {
		return keys, 0, fmt.Errorf("prune gateway request ids: %w", err)
	}
	if len(st.Partitions) > 0 && st.Partitions[0].Month.Before(cutoff) {
		// Older than the oldest month, a request is in the default partition (rare) or gone:
		// the scan below checks few requests that are still there.
		cutoff = st.Partitions[0].Month
	}
	for range idClaimBatches {
		tag, err := s.db.Exec(ctx, `
			DELETE FROM gateway_request_ids c
			WHERE c.id = ANY (ARRAY(
			    SELECT i.id FROM gateway_request_ids i
			    WHERE i.created_at < $1
			      AND NOT EXISTS (SELECT 1 FROM gateway_requests r WHERE r.id = i.id AND r.created_at = i.created_at)
			    ORDER BY i.created_at LIMIT $2))`, cutoff, idClaimBatch)
		if err != nil {
			return keys, claims, fmt.Errorf("prune gateway request ids: %w", translate(err))
		}
		claims += tag.RowsAffected()
		if tag.RowsAffected() < idClaimBatch {
			break
		}
	}
	return keys, claims, nil
}
