package store

import (
	"context"
	"errors"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// What a settled gateway request leaves behind beyond itself (DESIGN §5): the activities
// decide it from the outcome (activities/gateway_followups.go); the writes are here. Each
// is idempotent, so a retried activity writes nothing twice.

// GatewayTransaction is the organization's transaction row of a settled gateway request.
type GatewayTransaction struct {
	// Type is open, close or gateway_transaction; Status what the request came to.
	Type, Status string
	// LockerName names the locker; empty: the gateway mirror's name of LockerID.
	LockerName string
	LockerID   int
	// Code is the access code of an open (its masked digits go in the row).
	Code *AccessCode
	// OrderRef is the transaction id a create made at the gateway.
	OrderRef string
}

// CodeOpenEffect is what an access-code open's outcome does to its code, as the activities
// decide it.
type CodeOpenEffect struct {
	// Status is the transaction row's: opened, failed, or unknown (no answer: the door may
	// have moved).
	Status string
	// Used: the door opened, so access_code.used is recorded (at the request's completion).
	Used bool
	// Restore: a single-use code whose open never reached the gateway is given back.
	Restore bool
}

// SettleCodeOpen applies an access-code open's effect to code codeID in one transaction:
// the code given back, access_code.used recorded, and the transaction row of the open.
func (s *Store) SettleCodeOpen(ctx context.Context, r GatewayRequest, codeID uuid.UUID, e CodeOpenEffect) error {
	return s.WithTx(ctx, func(tx *Store) error {
		c, err := tx.AccessCode(ctx, r.OrganizationID, codeID)
		if err != nil {
			return err
		}
		if e.Restore {
			if _, err := tx.RestoreAccessCode(ctx, c.ID); err != nil {
				return err
			}
		}
		if e.Used {
			c.UsedAt = r.CompletedAt
			if _, err := tx.RecordEvent(ctx, accessCodeEvent("access_code.used", c)); err != nil {
				return err
			}
		}
		return tx.RecordGatewayTransaction(ctx, r, GatewayTransaction{Type: "open", Status: e.Status, LockerName: c.LockerName, Code: &c})
	})
}

// RecordGatewayTransaction writes the organization's transaction row for a settled gateway
// request, once (the request id is unique among rows).
func (s *Store) RecordGatewayTransaction(ctx context.Context, r GatewayRequest, t GatewayTransaction) error {
	var codeHash []byte
	var last2 *string
	if t.Code != nil {
		codeHash, last2 = t.Code.CodeHash, &t.Code.CodeLast2
	}
	var ref *string
	if t.OrderRef != "" {
		ref = &t.OrderRef
	}
	name := t.LockerName
	if name == "" {
		name = s.gatewayLockerName(ctx, r.GatewayID, t.LockerID)
	}
	// The row's created_at is the request's, the same on every retry, so (request_id,
	// created_at), the key the partitioned table allows, names one row per request.
	return s.exec(ctx, "record gateway transaction", `
		INSERT INTO transactions (id, organization_id, sub_organization_id, type, status, order_reference, pickup_code_hash,
		                          pickup_code_last2, location_id, location_name, city, pin_code, tower_name, locker_number,
		                          request_id, created_at, completed_at)
		SELECT $1, $2, l.sub_organization_id, $3, $4, $5, $6, $7, l.id, l.name, l.city, l.zip, $8, $9, $10, $11, $12
		FROM locations l WHERE l.id = $13
		ON CONFLICT (request_id, created_at) WHERE request_id IS NOT NULL DO NOTHING`,
		uuid.New(), r.OrganizationID, t.Type, t.Status, ref, codeHash, last2, r.GatewaySerial, name,
		r.ID, r.CreatedAt, r.CompletedAt, r.LocationID)
}

// gatewayLockerName is the mirror's name of a gateway locker (its number when unknown).
func (s *Store) gatewayLockerName(ctx context.Context, gatewayID int64, lockerID int) string {
	var name string
	err := s.db.QueryRow(ctx, `SELECT name FROM gateway_lockers WHERE gateway_id = $1 AND locker_id = $2`, gatewayID, lockerID).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) || err != nil {
		return strconv.Itoa(lockerID)
	}
	return name
}
