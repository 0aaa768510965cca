package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The webhook events of the gateways' alerts (DESIGN §10; internal/gatewayalerts picks the
// alerts up). A forced_open also takes the locker out of service in the locker mirror.
const (
	EventTypeLockerDoorAjar           = "locker.door_ajar"
	EventTypeLockerForcedOpen         = "locker.forced_open"
	EventTypeLockerItemLeft           = "locker.item_left"
	EventTypeGatewayControllerOffline = "gateway.controller_offline"
	EventTypeGatewayControllerOnline  = "gateway.controller_online"
	gatewayAlertForcedOpen            = "forced_open"
	gatewayAlertForcedOpenReasonCode  = "FORCED_OPEN"
)

// GatewayAlertEventType is the webhook event type of a gateway alert kind, and false for a
// kind this cloud does not know.
func GatewayAlertEventType(kind string) (string, bool) {
	switch kind {
	case "door_ajar":
		return EventTypeLockerDoorAjar, true
	case gatewayAlertForcedOpen:
		return EventTypeLockerForcedOpen, true
	case "item_left":
		return EventTypeLockerItemLeft, true
	case "controller_offline":
		return EventTypeGatewayControllerOffline, true
	case "controller_online":
		return EventTypeGatewayControllerOnline, true
	}
	return "", false
}

// ErrLeaseLost means another process holds the gateway's alert lease now: what was read under
// the lapsed lease is not recorded (the holder reads it again).
var ErrLeaseLost = errors.New("gateway alert lease lost")

// GatewayAlertWatch is a gateway leased for its alert long poll, with its cursor.
type GatewayAlertWatch struct {
	Gateway Gateway
	// LastSeq is the seq of the last alert taken (0: none yet) in Stream, the gateway's alert
	// log the cursor follows ("" until the first answer that names one).
	LastSeq int64
	Stream  string
}

// GatewayAlert is an alert as the gateway's GET /alerts shows it.
type GatewayAlert struct {
	Seq           int64
	Kind          string
	LockerID      *int
	LockerName    *string
	BankID        int
	ControllerID  string
	At            time.Time
	Message       string
	TransactionID *string
}

// GatewayAlertBatch is one answer of a gateway's GET /alerts to record.
type GatewayAlertBatch struct {
	GatewayID int64
	Holder    string
	Alerts    []GatewayAlert
	// Next is the cursor after the batch (the answer's next), in Stream (the answer's stream).
	Next   int64
	Stream string
	// Lease renews the holder's lease to now()+Lease.
	Lease time.Duration
}

// ClaimGatewayAlertWatches leases up to limit enabled gateways not known offline whose alert
// lease is free (never taken, lapsed or released) to holder until now()+lease, with their
// cursors; a gateway seen for the first time gets a cursor at 0.
func (s *Store) ClaimGatewayAlertWatches(ctx context.Context, holder string, limit int, lease time.Duration) ([]GatewayAlertWatch, error) {
	if _, err := s.db.Exec(ctx, `
		INSERT INTO gateway_alert_cursors (gateway_id)
		SELECT id FROM gateways WHERE disabled_at IS NULL ON CONFLICT (gateway_id) DO NOTHING`); err != nil {
		return nil, fmt.Errorf("add gateway alert cursors: %w", translate(err))
	}
	rows, err := s.db.Query(ctx, `
		WITH claimed AS (
		    UPDATE gateway_alert_cursors c SET leased_by = $1, leased_until = now() + make_interval(secs => $3), updated_at = now()
		    WHERE c.gateway_id IN (
		        SELECT c2.gateway_id FROM gateway_alert_cursors c2 JOIN gateways g2 ON g2.id = c2.gateway_id
		        WHERE c2.leased_until < now() AND g2.disabled_at IS NULL AND g2.online IS NOT FALSE
		        ORDER BY c2.leased_until LIMIT $2 FOR UPDATE OF c2 SKIP LOCKED)
		    RETURNING c.gateway_id, c.last_seq, c.stream)
		SELECT `+gatewayColumns+`, claimed.last_seq, claimed.stream FROM claimed JOIN gateways g ON g.id = claimed.gateway_id`,
		holder, limit, lease.Seconds())
	return scanAll(rows, err, "claim gateway alert watches", "gateway alert watch", nil, func(row pgx.Row) (GatewayAlertWatch, error) {
		var w GatewayAlertWatch
		g := &w.Gateway
		err := row.Scan(&g.ID, &g.Serial, &g.OrganizationID, &g.LocationID, &g.BaseURL, &g.SecretSealed,
			&g.Disabled, &g.Online, &g.LastSeenAt, &g.HonoursKeys, &w.LastSeq, &w.Stream)
		return w, err
	})
}

// ReleaseGatewayAlertWatch gives up holder's lease of a gateway, which may be claimed again
// after the given pause (a gateway that did not answer waits a little).
func (s *Store) ReleaseGatewayAlertWatch(ctx context.Context, gatewayID int64, holder string, after time.Duration) error {
	return s.exec(ctx, "release gateway alert watch", `
		UPDATE gateway_alert_cursors SET leased_by = NULL, leased_until = now() + make_interval(secs => $3), updated_at = now()
		WHERE gateway_id = $1 AND leased_by = $2`, gatewayID, holder, after.Seconds())
}

// RecordGatewayAlerts records one answer of a gateway's GET /alerts in one transaction: the
// cursor moves to b.Next in b.Stream (a new stream's cursor starts where its answer says; the
// first stream a cursor sees is adopted as the log it followed) and the lease is renewed (ErrLeaseLost when holder no longer holds
// it: nothing is recorded), and each alert not recorded before is stored with its webhook
// event; a forced_open takes its locker out of service in the locker mirror. An alert of a
// kind this cloud does not know is passed over. It returns the alerts recorded now.
func (s *Store) RecordGatewayAlerts(ctx context.Context, b GatewayAlertBatch) ([]GatewayAlert, error) {
	var recorded []GatewayAlert
	err := s.WithTx(ctx, func(tx *Store) error {
		recorded = recorded[:0]
		var (
			orgID, locationID int64
			serial            string
		)
		err := tx.db.QueryRow(ctx, `
			UPDATE gateway_alert_cursors c
			SET last_seq = CASE WHEN c.stream IN ('', $5) THEN greatest(c.last_seq, $3) ELSE $3 END, stream = $5,
			    leased_until = now() + make_interval(secs => $4), updated_at = now()
			FROM gateways g WHERE c.gateway_id = $1 AND c.leased_by = $2 AND g.id = c.gateway_id
			RETURNING g.organization_id, g.location_id, g.serial`,
			b.GatewayID, b.Holder, b.Next, b.Lease.Seconds(), b.Stream).Scan(&orgID, &locationID, &serial)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrLeaseLost
		}
		if err != nil {
			return fmt.Errorf("move gateway alert cursor: %w", translate(err))
		}
		for _, a := range b.Alerts {
			typ, known := GatewayAlertEventType(a.Kind)
			if !known {
				// A kind of a newer gateway: passed over, so it never holds up the alerts after it.
				continue
			}
			tag, err := tx.db.Exec(ctx, `
				INSERT INTO gateway_alerts (gateway_id, stream, seq, kind, location_id, locker_id, locker_name, bank_id, controller_id, alerted_at, message)
				VALUES ($1, $11, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (gateway_id, stream, seq) DO NOTHING`,
				b.GatewayID, a.Seq, a.Kind, locationID, a.LockerID, a.LockerName, a.BankID, a.ControllerID, a.At, a.Message, b.Stream)
			if err != nil {
				return fmt.Errorf("record gateway alert %d: %w", a.Seq, translate(err))
			}
			if tag.RowsAffected() == 0 {
				continue // taken before
			}
			data := gatewayAlertData{GatewayID: serial, LocationID: locationID, Kind: a.Kind, Seq: a.Seq, LockerID: a.LockerID,
				LockerName: a.LockerName, BankID: a.BankID, ControllerID: a.ControllerID, AlertedAt: EventTime(a.At),
				Message: a.Message, TransactionID: a.TransactionID}
			if a.Kind == gatewayAlertForcedOpen && a.LockerID != nil {
				if _, err := tx.db.Exec(ctx, `UPDATE gateway_lockers SET out_of_service = true WHERE gateway_id = $1 AND locker_id = $2`,
					b.GatewayID, *a.LockerID); err != nil {
					return fmt.Errorf("mirror forced locker out of service: %w", translate(err))
				}
				data.OutOfService, data.ReasonCode = true, gatewayAlertForcedOpenReasonCode
			}
			if _, err := tx.RecordEvent(ctx, Event{OrgID: orgID, LocationID: locationID, Type: typ, Data: data}); err != nil {
				return err
			}
			recorded = append(recorded, a)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return recorded, nil
}

// gatewayAlertData is a gateway alert as its webhook event shows it.
type gatewayAlertData struct {
	GatewayID     string    `json:"gatewayId"`
	LocationID    int64     `json:"locationId"`
	Kind          string    `json:"kind" doc:"The gateway's alert kind"`
	Seq           int64     `json:"seq" doc:"The alert's number at its gateway"`
	LockerID      *int      `json:"lockerId,omitempty"`
	LockerName    *string   `json:"lockerName,omitempty"`
	BankID        int       `json:"bankId"`
	ControllerID  string    `json:"controllerId"`
	AlertedAt     EventTime `json:"alertedAt"`
	Message       string    `json:"message"`
	TransactionID *string   `json:"transactionId,omitempty" doc:"item_left: the released gateway transaction"`
	// OutOfService and ReasonCode: a forced_open took the locker out of service.
	OutOfService bool   `json:"outOfService,omitempty"`
	ReasonCode   string `json:"reasonCode,omitempty"`
}

// PruneGatewayAlerts deletes the alerts received more than keep ago (their events live on
// with the webhook events' own retention).
func (s *Store) PruneGatewayAlerts(ctx context.Context, keep time.Duration) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM gateway_alerts WHERE received_at < now() - make_interval(secs => $1)`, keep.Seconds())
	if err != nil {
		return 0, fmt.Errorf("prune gateway alerts: %w", translate(err))
	}
	return tag.RowsAffected(), nil
}
