package apiserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/store"
)

// Making an access code (DESIGN §5): the locker is held first, through a gateway request
// that creates a gateway transaction carrying the code's id; the code exists once the
// gateway confirmed the hold.

// newCodeDigits draws an access code: six random digits.
func newCodeDigits() (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%06d", n.Int64()), nil
}

// createAccessCode answers POST /locker.
func (s *Server) createAccessCode(ctx context.Context, in *struct{ Body CreateAccessCodeRequest }) (*struct{ Body AccessCodeBody }, error) {
	req := in.Body
	k := appKey(ctx)
	expiry, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(req.Expiry))
	if err != nil {
		return nil, s.appError(ctx, "access code", invalidField("expiry must be an RFC 3339 timestamp",
			"body.expiry", req.Expiry, "expected e.g. 2026-12-01T18:00:00Z"))
	}
	now := time.Now()
	if !expiry.After(now) || expiry.After(now.Add(MaxCodeLifetime)) {
		return nil, s.appError(ctx, "access code", invalidField("expiry must be in the future and at most one year ahead",
			"body.expiry", req.Expiry, ""))
	}
	gw, err := s.keyLocation(ctx, int64(req.LocationID))
	if err != nil {
		return nil, err
	}
	locker, err := s.lockerNamed(ctx, gw, req.LockerName)
	if err != nil {
		return nil, err
	}
	if _, err := s.deps.Store.ReleaseLapsedCode(ctx, gw.ID, locker.LockerID); err != nil {
		return nil, s.appError(ctx, "locker", err)
	}
	if has, err := s.deps.Store.LockerHasActiveCode(ctx, gw.ID, locker.LockerID); err != nil {
		return nil, s.appError(ctx, "locker", err)
	} else if has {
		return nil, s.appError(ctx, "locker", errConflict(fmt.Sprintf("locker %s already has an active access code", locker.Name)))
	}

	// Hold the locker first: its gateway transaction carries the code's id.
	codeID := uuid.New()
	body, _ := json.Marshal(map[string]any{"transactionId": codeID.String(), "lockerId": locker.LockerID})
	hold, err := s.gatewayCall(ctx, gw, store.NewGatewayRequest{Kind: gatewayreq.KindAccessCodeHold, Class: gatewayreq.ClassWrite,
		Method: http.MethodPost, Path: "/locker", GatewayPath: "/transactions", Body: body, Subject: codeID.String()}, codeHoldWait)
	if err != nil {
		return nil, s.appError(ctx, "locker hold", err)
	}
	held := hold.Terminal() && hold.Status == gatewayreq.StateCompleted && hold.Outcome.HTTPStatus == http.StatusCreated
	code := store.AccessCode{ID: codeID, OrganizationID: k.OrganizationID, SubOrganizationID: k.SubOrganizationID,
		LocationID: gw.LocationID, GatewayID: gw.ID, LockerID: locker.LockerID, LockerName: locker.Name,
		SingleUse: req.SingleUse, ExpiresAt: expiry.UTC(), CreatedByKey: &k.ID, Status: store.CodeActive}
	ring, err := s.codeKeyring()
	if err != nil {
		return nil, s.appError(ctx, "access code", err)
	}
	for attempt := 0; ; attempt++ {
		// Not err: the transaction's error below must reach the check after the loop.
		digits, derr := newCodeDigits()
		if derr != nil {
			return nil, s.appError(ctx, "access code", derr)
		}
		code.CodeSealed, code.CodeHash, code.CodeLast2 = ring.Seal(keyring.AccessCodePurpose(codeID), []byte(digits)), s.pickupCodeHash(digits), digits[4:]
		if !held {
			// Only the clean-up of a hold that may still land remains: the workflow waits for
			// the hold request to settle and releases whatever it left.
			code.Status = store.CodeRemoved
		}
		err = s.record(ctx, func(tx *store.Store) ([]store.OutboxItem, error) {
			created, err := tx.CreateAccessCode(ctx, code)
			if err != nil {
				return nil, err
			}
			code = created
			if !held {
				return []store.OutboxItem{outbox.AccessCodeCleanupItem(code, hold.ID)}, nil
			}
			return []store.OutboxItem{outbox.AccessCodeItem(code, "", nil)}, nil
		})
		if errors.Is(err, store.ErrCodeTaken) && attempt < 20 {
			continue
		}
		break
	}
	if err != nil {
		if errors.Is(err, store.ErrLockerHasCode) {
			err = errConflict(fmt.Sprintf("locker %s already has an active access code", locker.Name))
		}
		return nil, s.appError(ctx, "access code", err)
	}
	if !held {
		return nil, s.appError(ctx, "locker hold", &holdFailedError{r: hold, locker: locker.Name})
	}
	b, err := s.accessCodeBody(k, code)
	if err != nil {
		return nil, s.appError(ctx, "access code", err)
	}
	return &struct{ Body AccessCodeBody }{Body: b}, nil
}
