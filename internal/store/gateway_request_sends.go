package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/lockernet/lockernet/internal/gatewayreq"
)

// GatewaySend is what BeginGatewaySend returns: whether the send may go out, and where to.
type GatewaySend struct {
	// Began is false when this send number was already begun before (an activity retried
	// after a crash or a lost answer): it may have reached the gateway, so it must not be
	// sent again blindly.
	Began    bool
	Attempts int
	Gateway  Gateway
}

// BeginGatewaySend records that the workflow's send number send is about to go out: the
// request becomes dispatched and its attempts count up. It returns the gateway to send to
// in the same statement. A terminal request never begins a send (ErrNotFound).
//
// A read's record does not wait for its WAL flush (synchronous_commit off for this one
// statement): it is what makes a second run of the same send answer SendUnknown instead of
// sending again, and a read may be sent again (DESIGN §6.2), so losing the record in a
// Postgres crash costs at most a repeated read, while every read's answer saves a disk
// flush. Writes and hardware calls, which must never go out twice blindly, wait for it.
func (s *Store) BeginGatewaySend(ctx context.Context, id uuid.UUID, send int) (GatewaySend, error) {
	var out GatewaySend
	g := &out.Gateway
	var commit string
	err := s.db.QueryRow(ctx, `
		WITH old AS (
		    SELECT id, created_at, last_send FROM gateway_requests
		    WHERE id = $1 AND `+requestMonth+` AND completed_at IS NULL FOR UPDATE
		), upd AS (
		    UPDATE gateway_requests r SET
		        attempts = CASE WHEN old.last_send < $2 THEN r.attempts + 1 ELSE r.attempts END,
		        status = 'dispatched',
		        updated_at = now(),
		        last_send = greatest(old.last_send, $2)
		    FROM old WHERE r.id = old.id AND r.created_at = old.created_at
		    RETURNING r.gateway_id, r.attempts, old.last_send < $2 AS began, r.class
		)
		SELECT upd.began, upd.attempts, `+gatewayColumns+`,
		       set_config('synchronous_commit',
		                  CASE WHEN upd.class = $3 THEN 'off' ELSE current_setting('synchronous_commit') END, true)
		FROM upd JOIN gateways g ON g.id = upd.gateway_id`, id, send, gatewayreq.ClassRead).
		Scan(&out.Began, &out.Attempts, &g.ID, &g.Serial, &g.OrganizationID, &g.LocationID, &g.BaseURL,
			&g.SecretSealed, &g.Disabled, &g.Online, &g.LastSeenAt, &g.HonoursKeys, &commit)
	if err != nil {
		return GatewaySend{}, fmt.Errorf("begin gateway send: %w", translate(err))
	}
	return out, nil
}

// StoreGatewayAnswer keeps the body of the answer send number send got, so that the
// workflow's history need not carry it: the outcome's store takes it from here
// (gatewayreq.Outcome.BodyInStore). ErrNotFound when the request is settled already or
// another send began since. It waits for its flush, as the outcome's store relies on it.
func (s *Store) StoreGatewayAnswer(ctx context.Context, id uuid.UUID, send int, body []byte) error {
	if body == nil {
		body = []byte{}
	}
	return s.execOne(ctx, "store gateway answer", `
		UPDATE gateway_requests SET answer_body = $3, answer_send = $2
		WHERE id = $1 AND `+requestMonth+` AND last_send = $2 AND completed_at IS NULL`, id, send, body)
}

// AbandonGatewaySend records that send number send never reached the gateway (connection
// refused, DNS, TLS): the request is pending again and the same send may go out later.
func (s *Store) AbandonGatewaySend(ctx context.Context, id uuid.UUID, send int) error {
	return s.exec(ctx, "abandon gateway send", `
		UPDATE gateway_requests SET last_send = $2 - 1, status = 'pending', updated_at = now()
		WHERE id = $1 AND `+requestMonth+` AND last_send = $2 AND completed_at IS NULL`, id, send)
}

// GatewayOutcomeChannel is the Postgres NOTIFY channel on which FinishGatewayRequest
// announces, at commit, the id of each request that got its outcome.
const GatewayOutcomeChannel = "gateway_request_outcome"

// ListenGatewayOutcomes calls fn with the id of every gateway request that gets its outcome,
// on any instance, until ctx is done or the connection fails (the caller listens again). It
// calls ready once it listens. It holds one connection of the pool for its whole life.
func (s *Store) ListenGatewayOutcomes(ctx context.Context, ready func(), fn func(uuid.UUID)) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire listen connection: %w", translate(err))
	}
	// The connection keeps LISTENing: it must never go back to the pool.
	pc := conn.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = pc.Close(cctx)
	}()
	if _, err := pc.Exec(ctx, "LISTEN "+GatewayOutcomeChannel); err != nil {
		return fmt.Errorf("listen for gateway outcomes: %w", translate(err))
	}
	ready()
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for gateway outcomes: %w", err)
		}
		if id, err := uuid.Parse(n.Payload); err == nil {
			fn(id)
		}
	}
}

// Gateway health as a request outcome shows it.
const (
	GatewaySeenUnknown     = 0 // the outcome says nothing about the gateway (no answer)
	GatewaySeenAnswered    = 1 // the gateway answered: online now
	GatewaySeenUnreachable = 2 // the request could not be delivered: offline
)

// FinishGatewayRequest stores the terminal outcome and, in the same statement, what it shows
// about the gateway (seen, one of the GatewaySeen constants) and whether its locker mirror
// needs a refresh. It is idempotent: once a request has an outcome, later calls change
// nothing and return the stored request. orgID is the request's organization (0: not known):
// when it has no webhook endpoint, the outcome is one statement, not a transaction.
func (s *Store) FinishGatewayRequest(ctx context.Context, id uuid.UUID, orgID int64, o gatewayreq.Outcome, seen int, syncMirror bool) (GatewayRequest, error) {
	headers, err := json.Marshal(orEmpty(o.Headers))
	if err != nil {
		return GatewayRequest{}, fmt.Errorf("encode response headers: %w", err)
	}
	var details []byte
	if o.Details != nil {
		if details, err = json.Marshal(o.Details); err != nil {
			return GatewayRequest{}, fmt.Errorf("encode details: %w", err)
		}
	}
	cause := o.ErrorMessage
	if len(cause) > 500 {
		cause = cause[:500]
	}
	var r GatewayRequest
	var fresh bool
	err = s.atomically(ctx, orgID, func(tx *Store) error {
		var prior *bool
		var serr error
		r, serr = tx.finishGatewayRequest(ctx, id, o, seen, syncMirror, headers, details, cause, &prior)
		if errors.Is(translate(serr), ErrNotFound) {
			return nil // it already had its outcome
		}
		if serr != nil {
			return fmt.Errorf("finish gateway request: %w", translate(serr))
		}
		fresh = true
		// The outcome and what it showed of the gateway are events, in the same transaction.
		if _, err := tx.RecordEvent(ctx, gatewayRequestEvent(r)); err != nil {
			return err
		}
		switch {
		case seen == GatewaySeenAnswered && (prior == nil || !*prior):
			now := time.Now()
			_, err := tx.RecordEvent(ctx, gatewayHealthEvent(r.OrganizationID, r.LocationID, r.GatewaySerial, true, &now))
			return err
		case seen == GatewaySeenUnreachable && prior != nil && *prior:
			_, err := tx.RecordEvent(ctx, gatewayHealthEvent(r.OrganizationID, r.LocationID, r.GatewaySerial, false, nil))
			return err
		}
		return nil
	})
	if err != nil {
		return GatewayRequest{}, err
	}
	if !fresh {
		return s.GatewayRequestByID(ctx, id)
	}
	return r, nil
}

// finishGatewayRequest is FinishGatewayRequest's statement; prior receives whether the
// gateway was online before it (nil: unknown).
func (s *Store) finishGatewayRequest(ctx context.Context, id uuid.UUID, o gatewayreq.Outcome, seen int, syncMirror bool,
	headers, details []byte, cause string, prior **bool) (GatewayRequest, error) {
	return scanGatewayRequest(extraScan{row: s.db.QueryRow(ctx, `
		WITH fin AS (
		    UPDATE gateway_requests SET status = $2, http_status = $3, response_headers = $4,
		        response_body = CASE WHEN $12 THEN answer_body ELSE $5 END, answer_body = NULL, answer_send = NULL,
		        error_code = nullif($6, ''), error_message = nullif($7, ''), details = $8,
		        completed_at = now(), updated_at = now()
		    WHERE id = $1 AND `+requestMonth+` AND completed_at IS NULL
		    RETURNING *
		), gw AS (
		    UPDATE gateways g SET
		        online = CASE $9::integer WHEN 1 THEN true WHEN 2 THEN false ELSE g.online END,
		        last_seen_at = CASE WHEN $9::integer = 1 THEN now() ELSE g.last_seen_at END,
		        last_error = CASE $9::integer WHEN 1 THEN NULL WHEN 2 THEN $11 ELSE g.last_error END,
		        sync_due_at = CASE WHEN $10 THEN least(g.sync_due_at, now()) ELSE g.sync_due_at END
		    FROM fin WHERE g.id = fin.gateway_id AND ($9::integer <> 0 OR $10)
		), prior AS (
		    -- the gateway's state before this statement (all parts see the same snapshot)
		    SELECT g.online FROM gateways g JOIN fin ON g.id = fin.gateway_id
		)
		SELECT `+gatewayRequestColumns+`, (SELECT online FROM prior)
		FROM fin CROSS JOIN LATERAL (SELECT pg_notify('`+GatewayOutcomeChannel+`', fin.id::text)) AS announced`,
		id, o.Status, o.HTTPStatus, headers, o.Body, o.ErrorCode, o.ErrorMessage, details, seen, syncMirror, cause, o.BodyInStore), extra: []any{prior}})
}

// extraScan scans a row's leading columns into the caller's destinations and the rest into
// extra.
type extraScan struct {
	row   pgx.Row
	extra []any
}

func (e extraScan) Scan(dest ...any) error { return e.row.Scan(append(dest, e.extra...)...) }

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
