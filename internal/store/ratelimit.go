package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// RateWindow is the window the per-key limit counts requests in.
const RateWindow = time.Minute

// KeyAuthorization is the outcome of AuthorizeGatewayKey for a valid key.
type KeyAuthorization struct {
	KeyID            uuid.UUID
	KeyPrefix        string
	OrganizationID   int64
	OrganizationName string
	RateState
}

// RateState is a rate-limit decision (GCRA).
type RateState struct {
	// Limit is the caller's requests per RateWindow.
	Limit int
	// Allowed is false when the request exceeds the limit (nothing was counted).
	Allowed bool
	// TAT is the GCRA theoretical arrival time after this request; At is when it was seen.
	TAT, At time.Time
}

// Remaining is how many more requests the caller may send right now.
func (a RateState) Remaining() int {
	if !a.Allowed {
		return 0
	}
	interval := RateWindow / time.Duration(a.Limit)
	n := int((RateWindow - a.TAT.Sub(a.At)) / interval)
	return max(n, 0)
}

// RetryAfter is how long a rejected request must wait before one would be allowed.
func (a RateState) RetryAfter() time.Duration {
	interval := RateWindow / time.Duration(a.Limit)
	return max(a.TAT.Sub(a.At)-(RateWindow-interval), 0)
}

// ResetAt is when the key's full allowance is back (the bucket is full again).
func (a RateState) ResetAt() time.Time { return a.TAT }

// AuthorizeGatewayKey checks a presented key and counts the request against the key's rate
// limit, in one statement, so every apiserver instance shares both: a revoked key fails on
// its very next request everywhere, and the limit holds across instances.
//
// The limit is GCRA (a token bucket kept as one timestamp): the key may send Limit requests
// at once, then one per RateWindow/Limit; it is rolling, so no calendar boundary lets twice
// the limit through. A request over the limit changes nothing (it is not counted).
// ErrNotFound means the key is unknown or revoked. defaultLimit applies to keys without an
// override.
func (s *Store) AuthorizeGatewayKey(ctx context.Context, keyHash []byte, defaultLimit int) (KeyAuthorization, error) {
	var a KeyAuthorization
	if err := scanKeyAuthorization(s.db.QueryRow(ctx, authorizeGatewayKeySQL, keyHash, defaultLimit), &a); err != nil {
		return KeyAuthorization{}, fmt.Errorf("authorize gateway key: %w", translate(err))
	}
	return a, nil
}

// authorizeGatewayKeySQL is AuthorizeGatewayKey's statement ($1 the key's hash, $2 the
// default limit).
const authorizeGatewayKeySQL = `
		WITH k AS (
		    SELECT k.id, k.organization_id, o.name AS org_name, k.prefix,
		           coalesce(k.rate_limit, $2)::integer AS lim, clock_timestamp() AS at
		    FROM gateway_api_keys k JOIN organizations o ON o.id = k.organization_id
		    WHERE k.key_hash = $1 AND k.revoked_at IS NULL
		), rl AS (
		    INSERT INTO gateway_rate_limits AS r (key_id, tat, limit_per_minute, allowed, seen_at)
		    SELECT id, at + make_interval(secs => 60.0 / lim), lim, true, at FROM k
		    ON CONFLICT (key_id) ` + gcraUpdate + `
		    RETURNING r.key_id, r.tat, r.allowed, r.limit_per_minute, r.seen_at
		), used AS (
		    UPDATE gateway_api_keys u SET last_used_at = now()
		    FROM k WHERE u.id = k.id AND (u.last_used_at IS NULL OR u.last_used_at < now() - interval '1 minute')
		)
		SELECT k.id, k.prefix, k.organization_id, k.org_name, rl.limit_per_minute, rl.allowed, rl.tat, rl.seen_at
		FROM k JOIN rl ON rl.key_id = k.id`

func scanKeyAuthorization(row interface{ Scan(...any) error }, a *KeyAuthorization) error {
	return row.Scan(&a.KeyID, &a.KeyPrefix, &a.OrganizationID, &a.OrganizationName, &a.Limit, &a.Allowed, &a.TAT, &a.At)
}

// gcraUpdate advances a GCRA bucket (the row r, the request EXCLUDED): the request is allowed
// when the theoretical arrival time is no more than a window minus one interval ahead, and
// only an allowed request moves it on. Shared by every rate-limited surface.
const gcraUpdate = `DO UPDATE SET
    allowed = greatest(r.tat, EXCLUDED.seen_at)
              <= EXCLUDED.seen_at + make_interval(secs => 60.0 - 60.0 / EXCLUDED.limit_per_minute),
    tat = CASE WHEN greatest(r.tat, EXCLUDED.seen_at)
                    <= EXCLUDED.seen_at + make_interval(secs => 60.0 - 60.0 / EXCLUDED.limit_per_minute)
               THEN greatest(r.tat, EXCLUDED.seen_at) + make_interval(secs => 60.0 / EXCLUDED.limit_per_minute)
               ELSE r.tat END,
    limit_per_minute = EXCLUDED.limit_per_minute,
    seen_at = EXCLUDED.seen_at`

// RateKind names what a rate limit counts, and where its per-caller override lives.
type RateKind string

// The rate-limited callers of DESIGN §8 besides the gateway cloud API's keys.
const (
	RateTowerClient RateKind = "tower"  // tower API, per service-provider client (api_clients.rate_limit)
	RateTokenClient RateKind = "token"  // token endpoint, per client id (api_clients.token_rate_limit)
	RateAppKey      RateKind = "appkey" // app engine API, per key (app_api_keys.rate_limit)
)

// CountRequest counts one request of the caller id against its rate limit (the override in
// the database, else defaultLimit), in one statement shared by every instance: GCRA, rolling,
// a refused request is not counted. For RateAppKey, id is the key's uuid.
func (s *Store) CountRequest(ctx context.Context, kind RateKind, id string, defaultLimit int) (RateState, error) {
	var keyID *uuid.UUID
	if kind == RateAppKey {
		u, err := uuid.Parse(id)
		if err != nil {
			return RateState{}, fmt.Errorf("count request: app key id %q: %w", id, ErrNotFound)
		}
		keyID = &u
	}
	var a RateState
	err := s.db.QueryRow(ctx, `
		WITH l AS (
		    SELECT $1::text || ':' || $2::text AS bucket,
		           coalesce(CASE $1::text
		               WHEN 'tower' THEN (SELECT rate_limit FROM api_clients WHERE client_id = $2::text)
		               WHEN 'token' THEN (SELECT token_rate_limit FROM api_clients WHERE client_id = $2::text)
		               WHEN 'appkey' THEN (SELECT rate_limit FROM app_api_keys WHERE id = $4::uuid)
		           END, $3::integer) AS lim,
		           clock_timestamp() AS at
		)
		INSERT INTO rate_limits AS r (bucket, tat, limit_per_minute, allowed, seen_at)
		SELECT bucket, at + make_interval(secs => 60.0 / lim), lim, true, at FROM l
		ON CONFLICT (bucket) `+gcraUpdate+`
		RETURNING r.limit_per_minute, r.allowed, r.tat, r.seen_at`, string(kind), id, defaultLimit, keyID).
		Scan(&a.Limit, &a.Allowed, &a.TAT, &a.At)
	if err != nil {
		return RateState{}, fmt.Errorf("count request: %w", translate(err))
	}
	return a, nil
}

// Credential failures (DESIGN §8: failed credentials are limited apart). A bucket names who
// presents which credential from where, e.g. a client id and a source address. The first
// CredentialFreeAttempts wrong credentials of an hour are judged at once; from then on each
// blocks the bucket for twice as long as the one before (1 s, 2 s, 4 s, ... up to
// CredentialMaxBackoff). A right credential clears the bucket; a bucket forgets an hour after
// its last failure. While a bucket is blocked nothing is counted and every credential, right
// or wrong, is refused alike.
const (
	CredentialFreeAttempts = 5
	CredentialMaxBackoff   = 15 * time.Minute
	credentialMemory       = time.Hour
)

// CredentialAttempt is the decision on a credential presented against a bucket.
type CredentialAttempt struct {
	// Allowed is false while the bucket is blocked: answer 429, nothing was counted.
	Allowed bool
	// Failures are the bucket's failures counted so far.
	Failures int
	// NextAt is when the bucket's next attempt may come; At is when this one was seen.
	NextAt, At time.Time
}

// RetryAfter is how long a refused attempt must wait.
func (a CredentialAttempt) RetryAfter() time.Duration { return max(a.NextAt.Sub(a.At), 0) }

// CredentialOutcome records the outcome of a credential checked against bucket, in one
// statement on the bucket's row shared by every instance (the rate_limits table of
// CountRequest): the answer depends on the row as that statement finds it, so parallel wrong
// credentials cannot all be judged, and right ones are never counted. right clears the
// bucket; a wrong one counts a failure and earns the back-off. Either is refused (Allowed
// false, nothing changed) while the bucket is blocked. A failure also drops a few buckets idle
// for more than an hour.
func (s *Store) CredentialOutcome(ctx context.Context, bucket string, right bool) (CredentialAttempt, error) {
	var a CredentialAttempt
	var err error
	if right {
		err = s.db.QueryRow(ctx, `
			WITH l AS (SELECT clock_timestamp() AS at),
			cur AS (SELECT r.tat, r.failures FROM rate_limits r WHERE r.bucket = $1 AND r.failures > 0 FOR UPDATE),
			cleared AS (DELETE FROM rate_limits r USING cur, l WHERE r.bucket = $1 AND cur.tat <= l.at)
			SELECT coalesce((SELECT tat FROM cur), at) <= at, coalesce((SELECT failures FROM cur), 0),
			       coalesce((SELECT tat FROM cur), at), at
			FROM l`, bucket).Scan(&a.Allowed, &a.Failures, &a.NextAt, &a.At)
	} else {
		err = s.db.QueryRow(ctx, `
			WITH l AS (SELECT clock_timestamp() AS at),
			stale AS (
			    DELETE FROM rate_limits WHERE ctid = ANY (ARRAY(
			        SELECT ctid FROM rate_limits
			        WHERE failures > 0 AND seen_at < (SELECT at FROM l) - $3::interval AND bucket <> $1
			        ORDER BY seen_at LIMIT 10))
			)
			INSERT INTO rate_limits AS r (bucket, tat, limit_per_minute, allowed, seen_at, failures)
			SELECT $1, at + CASE WHEN 1 >= $2 THEN interval '1 second' ELSE interval '0' END, $2, true, at, 1 FROM l
			ON CONFLICT (bucket) DO UPDATE SET
			    allowed = r.tat <= EXCLUDED.seen_at,
			    failures = CASE WHEN r.tat > EXCLUDED.seen_at THEN r.failures
			                    WHEN r.seen_at < EXCLUDED.seen_at - $3::interval THEN 1
			                    ELSE r.failures + 1 END,
			    tat = CASE WHEN r.tat > EXCLUDED.seen_at THEN r.tat
			               ELSE EXCLUDED.seen_at + make_interval(secs => CASE
			                   WHEN (CASE WHEN r.seen_at < EXCLUDED.seen_at - $3::interval THEN 1 ELSE r.failures + 1 END) < $2 THEN 0
			                   ELSE least(power(2, least((CASE WHEN r.seen_at < EXCLUDED.seen_at - $3::interval THEN 1 ELSE r.failures + 1 END) - $2, 20)), $4)
			               END) END,
			    limit_per_minute = EXCLUDED.limit_per_minute,
			    seen_at = CASE WHEN r.tat > EXCLUDED.seen_at THEN r.seen_at ELSE EXCLUDED.seen_at END
			RETURNING r.allowed, r.failures, r.tat, (SELECT at FROM l)`,
			bucket, CredentialFreeAttempts, credentialMemory, CredentialMaxBackoff.Seconds()).
			Scan(&a.Allowed, &a.Failures, &a.NextAt, &a.At)
	}
	if err != nil {
		return CredentialAttempt{}, fmt.Errorf("credential outcome: %w", translate(err))
	}
	return a, nil
}
