package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/lockernet/lockernet/internal/gatewayreq"
)

// FollowUp is what settling a gateway request asks of the workflows: an access code's
// workflow to be told it was used up.
type FollowUp struct {
	UsedCode *uuid.UUID
}

// AfterGatewayRequest applies what a settled gateway request means for the rest of the
// service, once, whatever number of times it is called (DESIGN §5): the transaction row of
// an access-code open or close, or of a transaction created through the cloud API; a
// single-use code given back when its open was never delivered. It returns the code to be
// released when a single-use code's open went through. Call it inside WithTx.
func (s *Store) AfterGatewayRequest(ctx context.Context, r GatewayRequest) (FollowUp, error) {
	if !r.Terminal() {
		return FollowUp{}, nil
	}
	switch r.Kind {
	case gatewayreq.KindAccessCodeOpen:
		return s.afterCodeOpen(ctx, r)
	case gatewayreq.KindAccessCodeClose:
		return FollowUp{}, s.afterCodeClose(ctx, r)
	case gatewayreq.KindCreateTransaction:
		return FollowUp{}, s.afterCreateTransaction(ctx, r)
	}
	return FollowUp{}, nil
}

// lockerOperation is the gateway's LockerOperationResponse / Locker, as far as read here.
type lockerOperation struct {
	Success  *bool `json:"success"`
	DoorOpen bool  `json:"doorOpen"`
}

func (s *Store) afterCodeOpen(ctx context.Context, r GatewayRequest) (FollowUp, error) {
	// The path is /transactions/{code id}/open: the code's id is its hold's transaction id.
	parts := strings.Split(strings.Trim(r.GatewayPath, "/"), "/")
	if len(parts) != 3 {
		return FollowUp{}, fmt.Errorf("access-code open request %s: unexpected path %q", r.ID, r.GatewayPath)
	}
	codeID, err := uuid.Parse(parts[1])
	if err != nil {
		return FollowUp{}, fmt.Errorf("access-code open request %s: %w", r.ID, err)
	}
	c, err := s.AccessCode(ctx, r.OrganizationID, codeID)
	if err != nil {
		return FollowUp{}, err
	}
	status := "failed"
	var fu FollowUp
	switch {
	case r.Status == gatewayreq.StateCompleted && r.Outcome.HTTPStatus/100 == 2:
		status = "opened"
		var op lockerOperation
		if json.Unmarshal(r.Outcome.Body, &op) == nil && op.Success != nil && !*op.Success {
			status = "failed"
		}
		if c.SingleUse {
			fu.UsedCode = &c.ID
		}
		if status == "opened" {
			c.UsedAt = r.CompletedAt
			if _, err := s.RecordEvent(ctx, accessCodeEvent("access_code.used", c)); err != nil {
				return FollowUp{}, err
			}
		}
	case r.Status == gatewayreq.StateDispatchFailed && c.SingleUse:
		// Never delivered: the door did not open, so the code is given back.
		if _, err := s.RestoreAccessCode(ctx, c.ID); err != nil {
			return FollowUp{}, err
		}
	}
	return fu, s.gatewayTransactionRow(ctx, r, "open", status, c.LockerName, &c)
}

func (s *Store) afterCodeClose(ctx context.Context, r GatewayRequest) error {
	lockerID, err := strconv.Atoi(strings.TrimPrefix(r.GatewayPath, "/lockers/"))
	if err != nil {
		return fmt.Errorf("access-code close request %s: unexpected path %q", r.ID, r.GatewayPath)
	}
	status := "failed"
	if r.Status == gatewayreq.StateCompleted && r.Outcome.HTTPStatus == 200 {
		var op lockerOperation
		_ = json.Unmarshal(r.Outcome.Body, &op)
		status = "closed"
		if op.DoorOpen {
			status = "door_open"
		}
	}
	return s.gatewayTransactionRow(ctx, r, "close", status, s.gatewayLockerName(ctx, r.GatewayID, lockerID), nil)
}

func (s *Store) afterCreateTransaction(ctx context.Context, r GatewayRequest) error {
	if r.Status != gatewayreq.StateCompleted || r.Outcome.HTTPStatus != 201 {
		return nil
	}
	var tr struct {
		TransactionID string `json:"transactionId"`
		LockerID      int    `json:"lockerId"`
	}
	if err := json.Unmarshal(r.Outcome.Body, &tr); err != nil {
		return nil // the gateway's own body, mirrored; nothing to record from it
	}
	return s.gatewayTransactionRow(ctx, r, "gateway_transaction", "created", s.gatewayLockerName(ctx, r.GatewayID, tr.LockerID),
		nil, tr.TransactionID)
}

func (s *Store) gatewayLockerName(ctx context.Context, gatewayID int64, lockerID int) string {
	var name string
	err := s.db.QueryRow(ctx, `SELECT name FROM gateway_lockers WHERE gateway_id = $1 AND locker_id = $2`, gatewayID, lockerID).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) || err != nil {
		return strconv.Itoa(lockerID)
	}
	return name
}

// gatewayTransactionRow writes the organization's transaction row for a gateway request,
// once (the request id is unique among rows).
func (s *Store) gatewayTransactionRow(ctx context.Context, r GatewayRequest, typ, status, lockerName string, code *AccessCode, orderRef ...string) error {
	var codeHash []byte
	var last2 *string
	if code != nil {
		codeHash, last2 = code.CodeHash, &code.CodeLast2
	}
	var ref *string
	if len(orderRef) > 0 && orderRef[0] != "" {
		ref = &orderRef[0]
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO transactions (id, organization_id, sub_organization_id, type, status, order_reference, pickup_code_hash,
		                          pickup_code_last2, location_id, location_name, city, pin_code, tower_name, locker_number,
		                          request_id, created_at, completed_at)
		SELECT $1, $2, l.sub_organization_id, $3, $4, $5, $6, $7, l.id, l.name, l.city, l.zip, $8, $9, $10, $11, $12
		FROM locations l WHERE l.id = $13
		ON CONFLICT (request_id) WHERE request_id IS NOT NULL DO NOTHING`,
		uuid.New(), r.OrganizationID, typ, status, ref, codeHash, last2, r.GatewaySerial, lockerName,
		r.ID, r.CreatedAt, r.CompletedAt, r.LocationID)
	if err != nil {
		return fmt.Errorf("record gateway transaction: %w", translate(err))
	}
	return nil
}

// FollowUpGatewayRequest runs AfterGatewayRequest for a settled request in its own
// transaction.
func (s *Store) FollowUpGatewayRequest(ctx context.Context, r GatewayRequest) (FollowUp, error) {
	switch r.Kind {
	case gatewayreq.KindAccessCodeOpen, gatewayreq.KindAccessCodeClose, gatewayreq.KindCreateTransaction:
	default:
		return FollowUp{}, nil // nothing follows: no transaction to open on the fast path
	}
	var fu FollowUp
	err := s.WithTx(ctx, func(tx *Store) error {
		var err error
		fu, err = tx.AfterGatewayRequest(ctx, r)
		return err
	})
	return fu, err
}
