package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Access-code statuses.
const (
	CodeActive  = "active"
	CodeUsed    = "used"
	CodeRemoved = "removed"
	CodeExpired = "expired"
)

// AccessCode is a six-digit code that opens one gateway locker. CodeSealed is the code
// encrypted under the access-code key; CodeHash the keyed hash it is found by.
type AccessCode struct {
	ID                uuid.UUID
	OrganizationID    int64
	SubOrganizationID *int64 // the scope of the key that made it
	LocationID        int64
	GatewayID         int64
	LockerID          int
	LockerName        string
	CodeSealed        []byte
	CodeHash          []byte
	CodeLast2         string
	SingleUse         bool
	Status            string
	ExpiresAt         time.Time
	CreatedByKey      *uuid.UUID
	CreatedAt         time.Time
	EndedAt           *time.Time
	UsedAt            *time.Time
}

const accessCodeColumns = `c.id, c.organization_id, c.sub_organization_id, c.location_id, c.gateway_id, c.locker_id, c.locker_name,
	c.code_sealed, c.code_hash, c.code_last2, c.single_use,
	CASE WHEN c.status = 'active' AND c.expires_at <= now() THEN 'expired' ELSE c.status END,
	c.expires_at, c.created_by_key, c.created_at, c.ended_at, c.used_at`

func scanAccessCode(row pgx.Row) (AccessCode, error) {
	var c AccessCode
	err := row.Scan(&c.ID, &c.OrganizationID, &c.SubOrganizationID, &c.LocationID, &c.GatewayID, &c.LockerID, &c.LockerName,
		&c.CodeSealed, &c.CodeHash, &c.CodeLast2, &c.SingleUse, &c.Status, &c.ExpiresAt, &c.CreatedByKey, &c.CreatedAt, &c.EndedAt, &c.UsedAt)
	return c, err
}

// Conflicts CreateAccessCode reports.
var (
	// ErrCodeTaken: another active code of the location has the same digits; draw again.
	ErrCodeTaken = errors.New("access code digits taken")
	// ErrLockerHasCode: the locker already has an active code.
	ErrLockerHasCode = errors.New("locker already has an active access code")
)

// CreateAccessCode records a code with c.Status (active; or removed, when its locker could
// not be held and only its workflow's clean-up remains).
func (s *Store) CreateAccessCode(ctx context.Context, c AccessCode) (AccessCode, error) {
	var out AccessCode
	err := s.atomically(ctx, c.OrganizationID, func(tx *Store) error {
		var err error
		if out, err = tx.createAccessCode(ctx, c); err != nil || out.Status != CodeActive {
			return err
		}
		_, err = tx.RecordEvent(ctx, accessCodeEvent("access_code.created", out))
		return err
	})
	return out, err
}

func (s *Store) createAccessCode(ctx context.Context, c AccessCode) (AccessCode, error) {
	err := s.db.QueryRow(ctx, `
		INSERT INTO access_codes (id, organization_id, sub_organization_id, location_id, gateway_id, locker_id, locker_name,
		                          code_sealed, code_hash, code_last2, single_use, status, expires_at, created_by_key)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $13, $10, $14, $11, $12)
		RETURNING created_at`,
		c.ID, c.OrganizationID, c.SubOrganizationID, c.LocationID, c.GatewayID, c.LockerID, c.LockerName,
		c.CodeSealed, c.CodeHash, c.SingleUse, c.ExpiresAt, c.CreatedByKey, c.CodeLast2, c.Status).Scan(&c.CreatedAt)
	if err != nil {
		err = translate(err)
		switch {
		case errors.Is(err, ErrConflict) && strings.Contains(err.Error(), "access_codes_active_code"):
			return AccessCode{}, ErrCodeTaken
		case errors.Is(err, ErrConflict) && strings.Contains(err.Error(), "access_codes_one_per_locker"):
			return AccessCode{}, ErrLockerHasCode
		}
		return AccessCode{}, fmt.Errorf("create access code: %w", err)
	}
	return c, nil
}

// ReleaseLapsedCode ends an active code of the locker whose expiry has passed, so a new
// code can take the locker at once (its workflow would write the expiry back shortly).
func (s *Store) ReleaseLapsedCode(ctx context.Context, gatewayID int64, lockerID int) (*uuid.UUID, error) {
	var released *uuid.UUID
	err := s.atomically(ctx, 0, func(tx *Store) error {
		var id uuid.UUID
		err := tx.db.QueryRow(ctx, `
			UPDATE access_codes SET status = 'expired', ended_at = expires_at
			WHERE gateway_id = $1 AND locker_id = $2 AND status = 'active' AND expires_at <= now()
			RETURNING id`, gatewayID, lockerID).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("release lapsed access code: %w", translate(err))
		}
		released = &id
		return tx.recordCodeEvent(ctx, "access_code.expired", id)
	})
	return released, err
}

// recordCodeEvent records an event about code id as it is now.
func (s *Store) recordCodeEvent(ctx context.Context, typ string, id uuid.UUID) error {
	c, err := s.AccessCode(ctx, 0, id)
	if err != nil {
		return err
	}
	_, err = s.RecordEvent(ctx, accessCodeEvent(typ, c))
	return err
}

// AccessCode returns a code of the organization (any status).
func (s *Store) AccessCode(ctx context.Context, orgID int64, id uuid.UUID) (AccessCode, error) {
	c, err := scanAccessCode(s.db.QueryRow(ctx, `SELECT `+accessCodeColumns+` FROM access_codes c WHERE c.id = $1 AND ($2 = 0 OR c.organization_id = $2)`, id, orgID))
	if err != nil {
		return AccessCode{}, fmt.Errorf("get access code: %w", translate(err))
	}
	return c, nil
}

// ActiveAccessCodeByHash finds the location's active, unexpired code with this keyed hash.
func (s *Store) ActiveAccessCodeByHash(ctx context.Context, locationID int64, hash []byte) (AccessCode, error) {
	c, err := scanAccessCode(s.db.QueryRow(ctx, `SELECT `+accessCodeColumns+` FROM access_codes c
		WHERE c.location_id = $1 AND c.code_hash = $2 AND c.status = 'active' AND c.expires_at > now()`, locationID, hash))
	if err != nil {
		return AccessCode{}, fmt.Errorf("find access code: %w", translate(err))
	}
	return c, nil
}

// UseSingleUseCode consumes a single-use code before its door is opened. Of any number of
// concurrent callers exactly one gets true.
func (s *Store) UseSingleUseCode(ctx context.Context, id uuid.UUID) (bool, error) {
	tag, err := s.db.Exec(ctx, `
		UPDATE access_codes SET status = 'used', used_at = now(), ended_at = now()
		WHERE id = $1 AND single_use AND status = 'active' AND expires_at > now()`, id)
	if err != nil {
		return false, fmt.Errorf("use access code: %w", translate(err))
	}
	return tag.RowsAffected() == 1, nil
}

// TouchAccessCode records the use of a multi-use code.
func (s *Store) TouchAccessCode(ctx context.Context, id uuid.UUID) error {
	if _, err := s.db.Exec(ctx, `UPDATE access_codes SET used_at = now() WHERE id = $1`, id); err != nil {
		return fmt.Errorf("touch access code: %w", translate(err))
	}
	return nil
}

// RestoreAccessCode gives a single-use code back when its open was never delivered.
func (s *Store) RestoreAccessCode(ctx context.Context, id uuid.UUID) (bool, error) {
	tag, err := s.db.Exec(ctx, `
		UPDATE access_codes SET status = 'active', used_at = NULL, ended_at = NULL
		WHERE id = $1 AND status = 'used' AND expires_at > now()
		  AND NOT EXISTS (SELECT 1 FROM access_codes o WHERE o.gateway_id = access_codes.gateway_id
		                  AND o.locker_id = access_codes.locker_id AND o.status = 'active')`, id)
	if err != nil {
		return false, fmt.Errorf("restore access code: %w", translate(err))
	}
	return tag.RowsAffected() == 1, nil
}

// RemoveAccessCode removes an active code of the organization. changed is false when it had
// already ended (removed again: still the same answer).
func (s *Store) RemoveAccessCode(ctx context.Context, orgID int64, id uuid.UUID) (c AccessCode, changed bool, err error) {
	err = s.atomically(ctx, orgID, func(tx *Store) error {
		tag, err := tx.db.Exec(ctx, `
			UPDATE access_codes SET status = 'removed', ended_at = now()
			WHERE id = $1 AND organization_id = $2 AND status = 'active'`, id, orgID)
		if err != nil {
			return fmt.Errorf("remove access code: %w", translate(err))
		}
		if c, err = tx.AccessCode(ctx, orgID, id); err != nil {
			return err
		}
		if changed = tag.RowsAffected() == 1; changed {
			_, err = tx.RecordEvent(ctx, accessCodeEvent("access_code.removed", c))
		}
		return err
	})
	return c, changed, err
}

// ExpireAccessCode writes an expiry back: ErrNotDue before the code's time, false when it
// had ended otherwise.
func (s *Store) ExpireAccessCode(ctx context.Context, id uuid.UUID) (bool, error) {
	var expired bool
	err := s.atomically(ctx, 0, func(tx *Store) error {
		tag, err := tx.db.Exec(ctx, `
			UPDATE access_codes SET status = 'expired', ended_at = expires_at
			WHERE id = $1 AND status = 'active' AND expires_at <= now()`, id)
		if err != nil {
			return fmt.Errorf("expire access code: %w", translate(err))
		}
		if expired = tag.RowsAffected() == 1; expired {
			return tx.recordCodeEvent(ctx, "access_code.expired", id)
		}
		return nil
	})
	if err != nil || expired {
		return expired, err
	}
	return false, s.notDueIfActive(ctx, "access_codes", id, "expire access code")
}

// notDueIfActive is what an expiry that changed nothing answers: ErrNotDue while the row in
// table is still active (its expiry not reached by the database clock yet), nil when it had
// already ended. what names the operation in errors.
func (s *Store) notDueIfActive(ctx context.Context, table string, id uuid.UUID, what string) error {
	var active bool
	if err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE id = $1 AND status = 'active')`, id).Scan(&active); err != nil {
		return fmt.Errorf("%s: %w", what, translate(err))
	}
	if active {
		return ErrNotDue
	}
	return nil
}

// AccessCodeFilter selects active codes; zero fields filter nothing.
type AccessCodeFilter struct {
	OrgID int64
	// ScopeSubOrg restricts to the locations of a sub-organization (a sub-organization key).
	ScopeSubOrg *int64
	// MadeBySubOrg restricts to codes made by keys of a sub-organization.
	MadeBySubOrg *int64
	LocationID   int64
	LockerName   string
}

// ListAccessCodes lists active, unexpired codes, newest first.
func (s *Store) ListAccessCodes(ctx context.Context, f AccessCodeFilter) ([]AccessCode, error) {
	return listRows(ctx, s, "access codes", func(r pgx.CollectableRow) (AccessCode, error) { return scanAccessCode(r) },
		`SELECT `+accessCodeColumns+`
		FROM access_codes c JOIN locations l ON l.id = c.location_id
		WHERE c.organization_id = $1 AND c.status = 'active' AND c.expires_at > now()
		  AND ($2::bigint IS NULL OR l.sub_organization_id = $2)
		  AND ($3::bigint IS NULL OR c.sub_organization_id = $3)
		  AND ($4 = 0 OR c.location_id = $4)
		  AND ($5 = '' OR c.locker_name = $5)
		ORDER BY c.created_at DESC, c.id DESC`, f.OrgID, f.ScopeSubOrg, f.MadeBySubOrg, f.LocationID, f.LockerName)
}

// CodeAttempt is a claimed attempt at a code: counted as a wrong guess unless released.
type CodeAttempt struct {
	ID      int64
	Allowed bool
	// Count is the wrong guesses already counted in the bucket that refused (when not
	// Allowed); RetryAt is when the oldest of them leaves the window.
	Count   int
	RetryAt time.Time
	// PerEndUser is true when the end user's own limit refused, false for the location's.
	PerEndUser bool
}

// CodeLimits bound the wrong guesses of one key at one location within Window: PerEndUser
// for each end user (or for calls that name none), Ceiling for all of them together.
type CodeLimits struct {
	Window     time.Duration
	PerEndUser int
	Ceiling    int
}

// ClaimCodeAttempt counts an attempt at a code of (key, location) before the code is judged,
// atomically: attempts of the same key and location queue on an advisory lock, so of any
// number of simultaneous guesses at most the limit are allowed. endUser is nil when the call
// names no end user. The caller releases the attempt when it was not a wrong guess.
func (s *Store) ClaimCodeAttempt(ctx context.Context, keyID uuid.UUID, locationID int64, endUser *string, l CodeLimits) (CodeAttempt, error) {
	var a CodeAttempt
	err := s.WithTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('code-attempts:' || $1::uuid::text || ':' || $2::bigint::text, 0))`,
			keyID, locationID); err != nil {
			return err
		}
		var mine, all int
		var mineOldest, allOldest *time.Time
		if err := tx.db.QueryRow(ctx, `
			SELECT count(*) FILTER (WHERE end_user_id IS NOT DISTINCT FROM $3::text), min(at) FILTER (WHERE end_user_id IS NOT DISTINCT FROM $3::text),
			       count(*), min(at)
			FROM access_code_failures
			WHERE key_id = $1 AND location_id = $2 AND at > now() - make_interval(secs => $4)`,
			keyID, locationID, endUser, l.Window.Seconds()).Scan(&mine, &mineOldest, &all, &allOldest); err != nil {
			return err
		}
		switch {
		case mine >= l.PerEndUser:
			a = CodeAttempt{Count: mine, RetryAt: mineOldest.Add(l.Window), PerEndUser: true}
			return nil
		case all >= l.Ceiling:
			a = CodeAttempt{Count: all, RetryAt: allOldest.Add(l.Window)}
			return nil
		}
		a.Allowed = true
		return tx.db.QueryRow(ctx, `INSERT INTO access_code_failures (key_id, location_id, end_user_id) VALUES ($1, $2, $3::text) RETURNING id`,
			keyID, locationID, endUser).Scan(&a.ID)
	})
	if err != nil {
		return CodeAttempt{}, fmt.Errorf("claim access code attempt: %w", translate(err))
	}
	return a, nil
}

// ReleaseCodeAttempt uncounts an attempt that was not a wrong guess.
func (s *Store) ReleaseCodeAttempt(ctx context.Context, id int64) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM access_code_failures WHERE id = $1`, id); err != nil {
		return fmt.Errorf("release access code attempt: %w", translate(err))
	}
	return nil
}

// GatewayLocation is a gateway location of the organization within a sub-organization's
// scope (nil: any of the organization's).
func (s *Store) GatewayLocationInScope(ctx context.Context, orgID int64, subOrg *int64, locationID int64) (Gateway, error) {
	g, err := scanGateway(s.db.QueryRow(ctx, `SELECT `+gatewayColumns+` FROM gateways g JOIN locations l ON l.id = g.location_id
		WHERE g.location_id = $1 AND g.organization_id = $2 AND ($3::bigint IS NULL OR l.sub_organization_id = $3)`, locationID, orgID, subOrg))
	if err != nil {
		return Gateway{}, fmt.Errorf("find gateway location: %w", translate(err))
	}
	return g, nil
}

// LockerHasActiveCode reports whether the gateway locker has an active, unexpired code.
func (s *Store) LockerHasActiveCode(ctx context.Context, gatewayID int64, lockerID int) (bool, error) {
	var has bool
	err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM access_codes WHERE gateway_id = $1 AND locker_id = $2
		AND status = 'active' AND expires_at > now())`, gatewayID, lockerID).Scan(&has)
	if err != nil {
		return false, fmt.Errorf("check locker's access code: %w", translate(err))
	}
	return has, nil
}
