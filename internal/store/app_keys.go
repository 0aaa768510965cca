package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/lockernet/lockernet/internal/credential"
)

// AppKey is an app engine API key (never its secret).
type AppKey struct {
	ID                uuid.UUID
	OrganizationID    int64
	SubOrganizationID *int64
	Prefix            string
	ClientID          *string
	CreatedAt         time.Time
	LastUsedAt        *time.Time
}

// OrgWide reports whether the key is an organization admin key.
func (k AppKey) OrgWide() bool { return k.SubOrganizationID == nil }

// CreateAppKey mints a new app engine key for k (its organization, sub-organization and
// client; a zero ID gets a fresh one), stores it by its hash and returns the key, which is
// never stored or shown again, with the stored row.
func (s *Store) CreateAppKey(ctx context.Context, k AppKey) (string, AppKey, error) {
	key := credential.NewAppKey()
	if k.ID == uuid.Nil {
		k.ID = uuid.New()
	}
	k.Prefix = credential.DisplayPrefix(key)
	err := s.db.QueryRow(ctx, `
		INSERT INTO app_api_keys (id, organization_id, sub_organization_id, key_hash, prefix, client_id)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING created_at`,
		k.ID, k.OrganizationID, k.SubOrganizationID, credential.Hash(key), k.Prefix, k.ClientID).Scan(&k.CreatedAt)
	if err != nil {
		return "", AppKey{}, fmt.Errorf("create app key: %w", translate(err))
	}
	return key, k, nil
}

const appKeySelect = `SELECT id, organization_id, sub_organization_id, prefix, client_id, created_at, last_used_at FROM app_api_keys`

func scanAppKey(row pgx.Row) (AppKey, error) {
	var k AppKey
	err := row.Scan(&k.ID, &k.OrganizationID, &k.SubOrganizationID, &k.Prefix, &k.ClientID, &k.CreatedAt, &k.LastUsedAt)
	return k, err
}

// ListAppKeys lists the live keys of the organization; with subOrg set, only that
// sub-organization's.
func (s *Store) ListAppKeys(ctx context.Context, orgID int64, subOrg *int64) ([]AppKey, error) {
	return listRows(ctx, s, "app keys", func(r pgx.CollectableRow) (AppKey, error) { return scanAppKey(r) },
		appKeySelect+`
		WHERE organization_id = $1 AND deleted_at IS NULL AND ($2::bigint IS NULL OR sub_organization_id = $2)
		ORDER BY created_at, id`, orgID, subOrg)
}

// DeleteAppKey deletes a live key of the organization; ErrNotFound otherwise.
func (s *Store) DeleteAppKey(ctx context.Context, orgID int64, id uuid.UUID) error {
	return s.execOne(ctx, "delete app key", `UPDATE app_api_keys SET deleted_at = now() WHERE id = $1 AND organization_id = $2 AND deleted_at IS NULL`, id, orgID)
}

// SubOrganizationOf reports whether the sub-organization belongs to the organization.
func (s *Store) SubOrganizationOf(ctx context.Context, orgID, subOrgID int64) (bool, error) {
	var ok bool
	err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sub_organizations WHERE id = $1 AND organization_id = $2)`, subOrgID, orgID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("check sub-organization: %w", translate(err))
	}
	return ok, nil
}

// UseAppKey finds a live key by the hash of its secret and records its use, in one statement.
// A key made by a client that has since been disabled is not live.
func (s *Store) UseAppKey(ctx context.Context, keyHash []byte) (AppKey, error) {
	k, err := scanAppKey(s.db.QueryRow(ctx, `
		UPDATE app_api_keys SET last_used_at = now() WHERE key_hash = $1 AND deleted_at IS NULL
		  AND NOT EXISTS (SELECT 1 FROM api_clients c WHERE c.client_id = app_api_keys.client_id AND c.disabled_at IS NOT NULL)
		RETURNING id, organization_id, sub_organization_id, prefix, client_id, created_at, last_used_at`, keyHash))
	if err != nil {
		return AppKey{}, fmt.Errorf("use app key: %w", translate(err))
	}
	return k, nil
}

// AuthorizeAppKey checks a presented app engine key and counts the request against the key's
// rate limit (its override, else defaultLimit) in one statement, as AuthorizeGatewayKey does
// for the gateway cloud API's keys: no instance caches a key, so a deleted key (or one whose
// client was disabled) fails on its very next request everywhere, and the limit holds across
// instances (the rate_limits bucket CountRequest keeps for RateAppKey). last_used_at moves at
// most once a minute. ErrNotFound means the key is unknown, deleted or its client disabled.
func (s *Store) AuthorizeAppKey(ctx context.Context, keyHash []byte, defaultLimit int) (AppKey, RateState, error) {
	var k AppKey
	var a RateState
	err := s.db.QueryRow(ctx, `
		WITH k AS (
		    SELECT k.id, k.organization_id, k.sub_organization_id, k.prefix, k.client_id, k.created_at,
		           greatest(k.last_used_at, CASE WHEN k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute'
		                                         THEN now() END) AS last_used_at,
		           coalesce(k.rate_limit, $2)::integer AS lim, clock_timestamp() AS at
		    FROM app_api_keys k
		    WHERE k.key_hash = $1 AND k.deleted_at IS NULL
		      AND NOT EXISTS (SELECT 1 FROM api_clients c WHERE c.client_id = k.client_id AND c.disabled_at IS NOT NULL)
		), rl AS (
		    INSERT INTO rate_limits AS r (bucket, tat, limit_per_minute, allowed, seen_at)
		    SELECT '`+string(RateAppKey)+`:' || id::text, at + make_interval(secs => 60.0 / lim), lim, true, at FROM k
		    ON CONFLICT (bucket) `+gcraUpdate+`
		    RETURNING r.limit_per_minute, r.allowed, r.tat, r.seen_at
		), used AS (
		    UPDATE app_api_keys u SET last_used_at = now()
		    FROM k WHERE u.id = k.id AND (u.last_used_at IS NULL OR u.last_used_at < now() - interval '1 minute')
		)
		SELECT k.id, k.organization_id, k.sub_organization_id, k.prefix, k.client_id, k.created_at, k.last_used_at,
		       rl.limit_per_minute, rl.allowed, rl.tat, rl.seen_at
		FROM k, rl`, keyHash, defaultLimit).
		Scan(&k.ID, &k.OrganizationID, &k.SubOrganizationID, &k.Prefix, &k.ClientID, &k.CreatedAt, &k.LastUsedAt,
			&a.Limit, &a.Allowed, &a.TAT, &a.At)
	if err != nil {
		return AppKey{}, RateState{}, fmt.Errorf("authorize app key: %w", translate(err))
	}
	return k, a, nil
}
