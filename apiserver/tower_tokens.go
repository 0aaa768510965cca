package apiserver

import (
	"context"
	"crypto/rand"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/towerproto"
	"github.com/lockernet/lockernet/workflows/contract"
)

// LockerTokenRequest is the body of the drop-off, pickup and release token operations.
type LockerTokenRequest struct {
	Duration   int     `json:"duration" minimum:"1" maximum:"86400" doc:"Seconds of token life"`
	ClientInfo *string `json:"client_info,omitempty" maxLength:"256" nullable:"true" doc:"Information to associate with the token, e.g. an order reference"`
}

// TokenBody is a locker token. payload and payload_auth are snake_case on purpose: that is
// how Harbor's SDKs read them.
type TokenBody struct {
	ID          uuid.UUID `json:"id"`
	Type        string    `json:"type" enum:"dropoff,pickup,release"`
	LockerID    int64     `json:"lockerId"`
	TowerID     string    `json:"towerId"`
	ClientInfo  *string   `json:"clientInfo"`
	CreatedAt   Timestamp `json:"createdAt"`
	ExpiresAt   Timestamp `json:"expiresAt"`
	Payload     string    `json:"payload" doc:"Even-length lower-case hex: the token the tower verifies offline"`
	PayloadAuth string    `json:"payload_auth" doc:"Even-length lower-case hex: 00 + HMAC-SHA256 of the payload with the tower's token key"`
}

type tokenOut struct {
	Body TokenBody
}

func (s *Server) registerTokens(api huma.API) {
	tags := []string{"Locker tokens"}
	for _, t := range []struct{ typ, path, summary, desc string }{
		{store.TokenDropoff, "dropoff-locker-tokens", "Create a drop-off token",
			"The locker must be available, reserved by the caller, or rented, declined or occupied by the caller. " +
				"It becomes rented (a reservation is consumed) and stays in the caller's possession until the item is picked up, " +
				"or until the last unused drop-off token expires."},
		{store.TokenPickup, "pickup-locker-tokens", "Create a pickup token", "The locker must be occupied by the caller's item."},
		{store.TokenRelease, "release-locker-tokens", "Create a release token",
			"For a declined locker of the caller: using it at the tower (door closed empty) frees the locker."},
	} {
		huma.Register(api, op(huma.Operation{
			OperationID: "create-" + t.typ + "-token", Method: http.MethodPost,
			Path: "/api/v1/towers/{tower_id}/lockers/{locker_id}/" + t.path, Tags: tags,
			Summary: t.summary, Description: t.desc, DefaultStatus: http.StatusCreated,
			Security: needs(jwtauth.ScopeServiceProvider),
		}), s.createLockerToken(t.typ))
	}

	huma.Register(api, op(huma.Operation{
		OperationID: "release-locker", Method: http.MethodPost, Path: "/api/v1/towers/{tower_id}/lockers/{locker_id}/release", Tags: tags,
		Summary:     "Give a rented locker back before using it",
		Description: "rented → declined. The caller keeps it for a 10-minute grace, in which a drop-off token rents it again and a release token frees it.",
		Security:    needs(jwtauth.ScopeServiceProvider),
	}), s.releaseLocker)
}

// lockerTokenInput is the request of the three token operations.
type lockerTokenInput struct {
	LockerPath
	Body LockerTokenRequest
}

// createLockerToken answers POST /api/v1/towers/{tower_id}/lockers/{locker_id}/<typ>-locker-tokens.
func (s *Server) createLockerToken(typ string) func(context.Context, *lockerTokenInput) (*tokenOut, error) {
	return func(ctx context.Context, in *lockerTokenInput) (*tokenOut, error) {
		body, err := s.issueToken(ctx, in.TowerID, in.LockerID, typ, in.Body, nil)
		if err != nil {
			return nil, s.towerError(ctx, "locker", err)
		}
		return &tokenOut{Body: body}, nil
	}
}

// releaseLocker answers POST /api/v1/towers/{tower_id}/lockers/{locker_id}/release.
func (s *Server) releaseLocker(ctx context.Context, in *struct {
	LockerPath
}) (*struct{ Body LockerBody }, error) {
	p := principal(ctx)
	err := s.deps.Store.WithTx(ctx, func(tx *store.Store) error {
		return tx.ReleaseLocker(ctx, p.OrgID, p.ClientID, in.TowerID, in.LockerID)
	})
	if err != nil {
		return nil, s.towerError(ctx, "locker", err)
	}
	k, err := s.deps.Store.Locker(ctx, p.OrgID, in.TowerID, in.LockerID)
	if err != nil {
		return nil, s.towerError(ctx, "locker", err)
	}
	return &struct{ Body LockerBody }{Body: lockerBody(k)}, nil
}

// issueToken makes the token's transition in Postgres, records its workflow in the outbox,
// and encodes the payload the tower verifies. extra runs in the same transaction (the
// locker-open links record themselves there; a return request marks its pickup window) and
// returns the workflow items it owes. Its errors are the store's: callers map them.
func (s *Server) issueToken(ctx context.Context, towerID string, lockerID int64, typ string, req LockerTokenRequest,
	extra func(tx *store.Store, t store.LockerToken, payload, auth string) ([]store.OutboxItem, error)) (TokenBody, error) {
	p := principal(ctx)
	tower, secret, err := s.tower(ctx, p.OrgID, towerID)
	if err != nil {
		return TokenBody{}, err
	}
	var res store.IssueResult
	var payload, auth string
	err = s.record(ctx, func(tx *store.Store) ([]store.OutboxItem, error) {
		var err error
		res, err = tx.IssueToken(ctx, store.IssueTokenParams{
			ID: uuid.New(), OrgID: p.OrgID, ClientID: p.ClientID, TowerID: tower.ID, LockerID: lockerID,
			Type: typ, Duration: time.Duration(req.Duration) * time.Second, ClientInfo: req.ClientInfo,
		})
		if err != nil {
			return nil, err
		}
		items := []store.OutboxItem{outbox.TokenItem(res.Token, "", "")}
		if id := res.ConsumedReservation; id != nil {
			// With its expiry: should this signal reach Temporal before the reservation's
			// own start, it starts the workflow with the right input.
			rsv := store.Reservation{ID: *id, LockerID: res.Token.LockerID, TowerID: res.Token.TowerID, LocationID: res.Token.LocationID,
				ExpiresAt: res.ConsumedReservationExpiresAt}
			items = append(items, outbox.ReservationItem(rsv, p.OrgID, contract.SignalReservationEnded, contract.OutcomeConsumed))
		}
		if payload, auth, err = encodeToken(res.Token, secret); err != nil {
			return nil, err
		}
		if extra != nil {
			more, err := extra(tx, res.Token, payload, auth)
			return append(items, more...), err
		}
		return items, nil
	})
	if err != nil {
		return TokenBody{}, err
	}
	t := res.Token
	return TokenBody{ID: t.ID, Type: t.Type, LockerID: t.LockerID, TowerID: t.TowerID, ClientInfo: t.ClientInfo,
		CreatedAt: ts(t.CreatedAt), ExpiresAt: ts(t.ExpiresAt), Payload: payload, PayloadAuth: auth}, nil
}

func encodeToken(t store.LockerToken, towerSecret []byte) (payload, auth string, err error) {
	typ, err := towerproto.ParseTokenType(t.Type)
	if err != nil {
		return "", "", err
	}
	tok := towerproto.Token{ID: t.ID, TowerID: t.TowerID, LockerID: t.LockerID, Type: typ,
		Generation: uint32(t.Generation), ExpiresAt: t.ExpiresAt}
	if _, err := rand.Read(tok.Nonce[:]); err != nil {
		return "", "", err
	}
	return towerproto.EncodeToken(tok, towerproto.TokenKey(towerSecret))
}
