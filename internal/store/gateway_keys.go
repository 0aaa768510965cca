package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/lockernet/lockernet/internal/credential"
)

// ErrAmbiguous means a lookup by a partial value (a key prefix) matched more than one row.
var ErrAmbiguous = errors.New("ambiguous")

// NewGatewayKey is a gateway cloud API key to store: only its hash and a display prefix.
type NewGatewayKey struct {
	ID             uuid.UUID
	OrganizationID int64
	Hash           []byte
	Prefix         string
	Label          string
	// RateLimit overrides the default requests per minute (nil keeps the default).
	RateLimit *int
}

// GatewayKey is a stored key (never the secret).
type GatewayKey struct {
	ID             uuid.UUID
	OrganizationID int64
	Prefix         string
	Label          string
	RateLimit      *int
	CreatedAt      time.Time
	RevokedAt      *time.Time
	LastUsedAt     *time.Time
}

// CreateGatewayKey stores a key.
func (s *Store) CreateGatewayKey(ctx context.Context, k NewGatewayKey) (GatewayKey, error) {
	out := GatewayKey{ID: k.ID, OrganizationID: k.OrganizationID, Prefix: k.Prefix, Label: k.Label, RateLimit: k.RateLimit}
	err := s.db.QueryRow(ctx, `
		INSERT INTO gateway_api_keys (id, organization_id, key_hash, prefix, label, rate_limit)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING created_at`,
		k.ID, k.OrganizationID, k.Hash, k.Prefix, k.Label, k.RateLimit).Scan(&out.CreatedAt)
	if err != nil {
		return GatewayKey{}, fmt.Errorf("create gateway key: %w", translate(err))
	}
	return out, nil
}

const gatewayKeyColumns = `id, organization_id, prefix, label, rate_limit, created_at, revoked_at, last_used_at`

func scanGatewayKey(row pgx.Row) (GatewayKey, error) {
	var k GatewayKey
	err := row.Scan(&k.ID, &k.OrganizationID, &k.Prefix, &k.Label, &k.RateLimit, &k.CreatedAt, &k.RevokedAt, &k.LastUsedAt)
	return k, err
}

// ActiveGatewayKeyByHash returns the unrevoked key with this hash (the seed checks that the
// key it wrote earlier still works).
func (s *Store) ActiveGatewayKeyByHash(ctx context.Context, hash []byte) (GatewayKey, error) {
	k, err := scanGatewayKey(s.db.QueryRow(ctx, `SELECT `+gatewayKeyColumns+`
		FROM gateway_api_keys WHERE key_hash = $1 AND revoked_at IS NULL`, hash))
	if err != nil {
		return GatewayKey{}, fmt.Errorf("get gateway key: %w", translate(err))
	}
	return k, nil
}

// GatewayKeys lists an organization's keys (0 lists every organization's), oldest first.
func (s *Store) GatewayKeys(ctx context.Context, orgID int64) ([]GatewayKey, error) {
	rows, err := s.db.Query(ctx, `SELECT `+gatewayKeyColumns+` FROM gateway_api_keys
		WHERE $1 = 0 OR organization_id = $1 ORDER BY created_at, id`, orgID)
	return scanAll(rows, err, "list gateway keys", "gateway key", nil, scanGatewayKey)
}

// RevokeGatewayKey revokes a key by id. Revoking a revoked key changes nothing and is not
// an error; an unknown id is ErrNotFound. The next request with the key fails on every
// apiserver, because each request checks the key in Postgres (see AuthorizeGatewayKey).
func (s *Store) RevokeGatewayKey(ctx context.Context, id uuid.UUID) (GatewayKey, error) {
	k, err := scanGatewayKey(s.db.QueryRow(ctx, `
		UPDATE gateway_api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1
		RETURNING `+gatewayKeyColumns, id))
	if err != nil {
		return GatewayKey{}, fmt.Errorf("revoke gateway key: %w", translate(err))
	}
	return k, nil
}

// RevokeGatewayKeyByPrefix revokes the one active key whose display prefix starts with
// prefix; ErrNotFound if none, ErrAmbiguous if several match.
func (s *Store) RevokeGatewayKeyByPrefix(ctx context.Context, prefix string) (GatewayKey, error) {
	if prefix == "" {
		return GatewayKey{}, fmt.Errorf("revoke gateway key: %w", ErrNotFound)
	}
	rows, err := s.db.Query(ctx, `SELECT id FROM gateway_api_keys
		WHERE revoked_at IS NULL AND starts_with(prefix, $1) LIMIT 2`, prefix)
	if err != nil {
		return GatewayKey{}, fmt.Errorf("find gateway key: %w", translate(err))
	}
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return GatewayKey{}, fmt.Errorf("scan gateway key: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return GatewayKey{}, fmt.Errorf("find gateway key: %w", translate(err))
	}
	switch len(ids) {
	case 0:
		return GatewayKey{}, fmt.Errorf("revoke gateway key: %w", ErrNotFound)
	case 1:
		return s.RevokeGatewayKey(ctx, ids[0])
	}
	return GatewayKey{}, fmt.Errorf("revoke gateway key with prefix %q: %w", prefix, ErrAmbiguous)
}

// GatewayKeyPrefixLen is how much of a key its display prefix keeps ("lnk_" + 8 hex).
const GatewayKeyPrefixLen = 12

// IssueGatewayKey makes a new gateway cloud API key for an organization, stores its hash
// and returns the key itself, which is never stored and must be shown once.
func (s *Store) IssueGatewayKey(ctx context.Context, orgID int64, label string, rateLimit *int) (string, GatewayKey, error) {
	key := credential.NewGatewayKey()
	k, err := s.CreateGatewayKey(ctx, NewGatewayKey{ID: uuid.New(), OrganizationID: orgID, Hash: credential.Hash(key),
		Prefix: key[:GatewayKeyPrefixLen], Label: label, RateLimit: rateLimit})
	if err != nil {
		return "", GatewayKey{}, err
	}
	return key, k, nil
}

// OrganizationByName returns the organization with exactly this name (operators name
// organizations in the admin commands).
func (s *Store) OrganizationByName(ctx context.Context, name string) (Organization, error) {
	o := Organization{Name: name}
	if err := s.db.QueryRow(ctx, `SELECT id FROM organizations WHERE name = $1`, name).Scan(&o.ID); err != nil {
		return Organization{}, fmt.Errorf("get organization: %w", translate(err))
	}
	return o, nil
}
