package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// NewGateway registers (or re-registers) a gateway at a location.
type NewGateway struct {
	Serial       string
	LocationID   int64
	BaseURL      string
	SecretSealed []byte
}

// Gateway is a registered gateway; its secret stays sealed.
type Gateway struct {
	ID             int64
	Serial         string
	OrganizationID int64
	LocationID     int64
	BaseURL        string
	SecretSealed   []byte
	Disabled       bool
	Online         *bool
	LastSeenAt     *time.Time
	// HonoursKeys says the gateway honours Idempotency-Key (as its answers last said):
	// a send whose fate is unknown may then go out again.
	HonoursKeys bool
}

const gatewayColumns = `g.id, g.serial, g.organization_id, g.location_id, g.base_url, g.secret_sealed,
	g.disabled_at IS NOT NULL, g.online, g.last_seen_at, g.honours_idempotency_keys`

func scanGateway(row pgx.Row) (Gateway, error) {
	var g Gateway
	err := row.Scan(&g.ID, &g.Serial, &g.OrganizationID, &g.LocationID, &g.BaseURL, &g.SecretSealed,
		&g.Disabled, &g.Online, &g.LastSeenAt, &g.HonoursKeys)
	return g, err
}

// RecordGatewayKeys records whether the gateway honours Idempotency-Key (its answers say so).
func (s *Store) RecordGatewayKeys(ctx context.Context, gatewayID int64, honoured bool) error {
	return s.exec(ctx, "record gateway idempotency keys", `UPDATE gateways SET honours_idempotency_keys = $2
		WHERE id = $1 AND honours_idempotency_keys <> $2`, gatewayID, honoured)
}

// UpsertGateway registers the gateway with this serial at a location of its organization,
// or updates its location, URL and secret. The organization is the location's. Moving a
// gateway to a location that already has another gateway is ErrConflict.
func (s *Store) UpsertGateway(ctx context.Context, g NewGateway) (Gateway, error) {
	row := s.db.QueryRow(ctx, `
		INSERT INTO gateways AS g (serial, organization_id, location_id, base_url, secret_sealed)
		SELECT $1, l.organization_id, l.id, $3, $4 FROM locations l WHERE l.id = $2
		ON CONFLICT (serial) DO UPDATE SET
		    organization_id = EXCLUDED.organization_id, location_id = EXCLUDED.location_id,
		    base_url = EXCLUDED.base_url, secret_sealed = EXCLUDED.secret_sealed,
		    disabled_at = NULL, sync_due_at = now(), updated_at = now()
		RETURNING `+gatewayColumns, g.Serial, g.LocationID, g.BaseURL, g.SecretSealed)
	out, err := scanGateway(row)
	if err != nil {
		return Gateway{}, fmt.Errorf("upsert gateway: %w", translate(err))
	}
	return out, nil
}

// GatewayAtLocation returns the gateway of a location of the organization; ErrNotFound for
// a location of another organization, one without a gateway, or a disabled gateway.
func (s *Store) GatewayAtLocation(ctx context.Context, orgID, locationID int64) (Gateway, error) {
	g, err := scanGateway(s.db.QueryRow(ctx, `
		SELECT `+gatewayColumns+` FROM gateways g
		WHERE g.location_id = $2 AND g.organization_id = $1 AND g.disabled_at IS NULL`, orgID, locationID))
	if err != nil {
		return Gateway{}, fmt.Errorf("get gateway of location: %w", translate(err))
	}
	return g, nil
}

// GatewayByID returns a gateway, disabled ones included (the caller decides).
func (s *Store) GatewayByID(ctx context.Context, id int64) (Gateway, error) {
	g, err := scanGateway(s.db.QueryRow(ctx, `SELECT `+gatewayColumns+` FROM gateways g WHERE g.id = $1`, id))
	if err != nil {
		return Gateway{}, fmt.Errorf("get gateway: %w", translate(err))
	}
	return g, nil
}

// GatewayBySerial returns a gateway by its serial.
func (s *Store) GatewayBySerial(ctx context.Context, serial string) (Gateway, error) {
	g, err := scanGateway(s.db.QueryRow(ctx, `SELECT `+gatewayColumns+` FROM gateways g WHERE g.serial = $1`, serial))
	if err != nil {
		return Gateway{}, fmt.Errorf("get gateway: %w", translate(err))
	}
	return g, nil
}

// GatewayLocation is a location of the gateway cloud API with its gateway's health.
type GatewayLocation struct {
	ID            int64
	Name          string
	Timezone      *string
	GatewaySerial string
	Online        bool
	LastSeenAt    *time.Time
}

// GatewayLocations lists the organization's locations that have a gateway, by id. A gateway
// counts as online when its last answer says so and is more recent than onlineWithin.
func (s *Store) GatewayLocations(ctx context.Context, orgID int64, onlineWithin time.Duration) ([]GatewayLocation, error) {
	rows, err := s.db.Query(ctx, `
		SELECT l.id, l.name, l.timezone, g.serial,
		       coalesce(g.online, false) AND g.last_seen_at > now() - make_interval(secs => $2),
		       g.last_seen_at
		FROM gateways g JOIN locations l ON l.id = g.location_id
		WHERE g.organization_id = $1 AND g.disabled_at IS NULL
		ORDER BY l.id`, orgID, onlineWithin.Seconds())
	return scanAll(rows, err, "list gateway locations", "gateway location", []GatewayLocation{}, func(row pgx.Row) (GatewayLocation, error) {
		var l GatewayLocation
		err := row.Scan(&l.ID, &l.Name, &l.Timezone, &l.GatewaySerial, &l.Online, &l.LastSeenAt)
		return l, err
	})
}

// RecordGatewayHealth records what a health check or a request outcome showed: online with
// the time it answered, or offline with the reason. A gateway that answered is never marked
// offline by an older observation.
func (s *Store) RecordGatewayHealth(ctx context.Context, gatewayID int64, online bool, cause string) error {
	return s.atomically(ctx, 0, func(tx *Store) error {
		var orgID, locationID int64
		var serial string
		var lastSeen *time.Time
		var prior *bool
		// prior is the state before this statement (read, and locked, before the update): a
		// change of state is an event.
		var err error
		if online {
			err = tx.db.QueryRow(ctx, `
				WITH prior AS (SELECT id, online FROM gateways WHERE id = $1 FOR UPDATE)
				UPDATE gateways g SET online = true, last_seen_at = now(), last_error = NULL FROM prior
				WHERE g.id = prior.id AND (g.online IS NOT TRUE OR g.last_seen_at IS NULL OR g.last_seen_at < now() - interval '1 second')
				RETURNING g.organization_id, g.location_id, g.serial, g.last_seen_at, prior.online`, gatewayID).
				Scan(&orgID, &locationID, &serial, &lastSeen, &prior)
		} else {
			err = tx.db.QueryRow(ctx, `
				WITH prior AS (SELECT id, online FROM gateways WHERE id = $1 FOR UPDATE)
				UPDATE gateways g SET online = false, last_error = left($2, 500) FROM prior WHERE g.id = prior.id
				RETURNING g.organization_id, g.location_id, g.serial, g.last_seen_at, prior.online`, gatewayID, cause).
				Scan(&orgID, &locationID, &serial, &lastSeen, &prior)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("record gateway health: %w", translate(err))
		}
		if (online && (prior == nil || !*prior)) || (!online && prior != nil && *prior) {
			_, err = tx.RecordEvent(ctx, gatewayHealthEvent(orgID, locationID, serial, online, lastSeen))
		}
		return err
	})
}

// MarkGatewaySyncDue asks for a refresh of the gateway's health and locker mirror now.
func (s *Store) MarkGatewaySyncDue(ctx context.Context, gatewayID int64) error {
	if _, err := s.db.Exec(ctx, `UPDATE gateways SET sync_due_at = now() WHERE id = $1 AND sync_due_at > now()`, gatewayID); err != nil {
		return fmt.Errorf("mark gateway sync due: %w", translate(err))
	}
	return nil
}

// ClaimDueGatewaySyncs leases up to limit gateways whose sync is due until now()+lease, so
// concurrent workers never sync the same gateway at the same time.
func (s *Store) ClaimDueGatewaySyncs(ctx context.Context, limit int, lease time.Duration) ([]Gateway, error) {
	rows, err := s.db.Query(ctx, `
		UPDATE gateways g SET sync_due_at = now() + make_interval(secs => $2)
		WHERE g.id IN (
		    SELECT id FROM gateways WHERE sync_due_at <= now() AND disabled_at IS NULL
		    ORDER BY sync_due_at LIMIT $1 FOR UPDATE SKIP LOCKED)
		RETURNING `+gatewayColumns, limit, lease.Seconds())
	return scanAll(rows, err, "claim gateway syncs", "gateway", nil, scanGateway)
}

// ScheduleGatewaySync sets when the gateway is synced next, unless a refresh was asked for
// while the claimed sync ran (then it stays due).
func (s *Store) ScheduleGatewaySync(ctx context.Context, gatewayID int64, after time.Duration) error {
	return s.exec(ctx, "schedule gateway sync", `UPDATE gateways SET sync_due_at = now() + make_interval(secs => $2)
		WHERE id = $1 AND sync_due_at > now()`, gatewayID, after.Seconds())
}

// GatewayLocker is one locker of the read-only mirror of a gateway's lockers.
type GatewayLocker struct {
	LockerID       int
	Name           string
	LockerTypeID   int
	LockerTypeName *string
	BankID         int
	IsLowLocker    bool
	OutOfService   bool
}

// ReplaceGatewayLockers makes the mirror of a gateway's lockers exactly lockers, in one
// transaction (call it inside WithTx).
func (s *Store) ReplaceGatewayLockers(ctx context.Context, gatewayID int64, lockers []GatewayLocker) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM gateway_lockers WHERE gateway_id = $1`, gatewayID); err != nil {
		return fmt.Errorf("clear gateway lockers: %w", translate(err))
	}
	for _, l := range lockers {
		_, err := s.db.Exec(ctx, `
			INSERT INTO gateway_lockers (gateway_id, locker_id, location_id, name, locker_type_id, locker_type_name,
			                             bank_id, is_low_locker, out_of_service)
			SELECT g.id, $2, g.location_id, $3, $4, $5, $6, $7, $8 FROM gateways g WHERE g.id = $1`,
			gatewayID, l.LockerID, l.Name, l.LockerTypeID, l.LockerTypeName, l.BankID, l.IsLowLocker, l.OutOfService)
		if err != nil {
			return fmt.Errorf("mirror gateway locker %d: %w", l.LockerID, translate(err))
		}
	}
	if _, err := s.db.Exec(ctx, `UPDATE gateways SET synced_at = now() WHERE id = $1`, gatewayID); err != nil {
		return fmt.Errorf("record gateway sync: %w", translate(err))
	}
	return nil
}

// GatewayLockers returns the mirror of a gateway's lockers by locker id.
func (s *Store) GatewayLockers(ctx context.Context, gatewayID int64) ([]GatewayLocker, error) {
	rows, err := s.db.Query(ctx, `
		SELECT locker_id, name, locker_type_id, locker_type_name, bank_id, is_low_locker, out_of_service
		FROM gateway_lockers WHERE gateway_id = $1 ORDER BY locker_id`, gatewayID)
	return scanAll(rows, err, "list gateway lockers", "gateway locker", nil, func(row pgx.Row) (GatewayLocker, error) {
		var l GatewayLocker
		err := row.Scan(&l.LockerID, &l.Name, &l.LockerTypeID, &l.LockerTypeName, &l.BankID, &l.IsLowLocker, &l.OutOfService)
		return l, err
	})
}

// GatewayLockerByName resolves a locker name at a location of the organization through the
// mirror (the app engine addresses gateway lockers this way).
func (s *Store) GatewayLockerByName(ctx context.Context, orgID, locationID int64, name string) (Gateway, GatewayLocker, error) {
	var l GatewayLocker
	var gatewayID int64
	err := s.db.QueryRow(ctx, `
		SELECT m.gateway_id, m.locker_id, m.name, m.locker_type_id, m.locker_type_name, m.bank_id, m.is_low_locker, m.out_of_service
		FROM gateway_lockers m JOIN gateways g ON g.id = m.gateway_id
		WHERE m.location_id = $2 AND m.name = $3 AND g.organization_id = $1 AND g.disabled_at IS NULL`,
		orgID, locationID, name).
		Scan(&gatewayID, &l.LockerID, &l.Name, &l.LockerTypeID, &l.LockerTypeName, &l.BankID, &l.IsLowLocker, &l.OutOfService)
	if err != nil {
		return Gateway{}, GatewayLocker{}, fmt.Errorf("find gateway locker: %w", translate(err))
	}
	g, err := s.GatewayByID(ctx, gatewayID)
	if err != nil {
		return Gateway{}, GatewayLocker{}, err
	}
	return g, l, nil
}

// SyncGatewayLockers replaces the mirror of a gateway's lockers in one transaction.
func (s *Store) SyncGatewayLockers(ctx context.Context, gatewayID int64, lockers []GatewayLocker) error {
	return s.WithTx(ctx, func(tx *Store) error { return tx.ReplaceGatewayLockers(ctx, gatewayID, lockers) })
}
