package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// InsertSigningKey stores a new signing key.
func (s *Store) InsertSigningKey(ctx context.Context, k SigningKey) error {
	return s.exec(ctx, "insert signing key", `
		INSERT INTO signing_keys (kid, algorithm, public_key, private_key_sealed) VALUES ($1, $2, $3, $4)`,
		k.KID, k.Algorithm, k.PublicKey, k.PrivateKeySealed)
}

// RetireSigningKeysExcept marks every active key other than kid as retired.
func (s *Store) RetireSigningKeysExcept(ctx context.Context, kid string) error {
	return s.exec(ctx, "retire signing keys", `UPDATE signing_keys SET retired_at = now() WHERE kid <> $1 AND retired_at IS NULL`, kid)
}

// RevokeSigningKeysExcept revokes every key other than kid: it verifies nothing from now on.
func (s *Store) RevokeSigningKeysExcept(ctx context.Context, kid string) error {
	return s.exec(ctx, "revoke signing keys", `
		UPDATE signing_keys SET retired_at = coalesce(retired_at, now()), revoked_at = now()
		WHERE kid <> $1 AND revoked_at IS NULL`, kid)
}

// SigningKeys returns the active keys and the keys retired within keep (revoked ones never),
// newest first.
func (s *Store) SigningKeys(ctx context.Context, keep time.Duration) ([]SigningKey, error) {
	rows, err := s.db.Query(ctx, `
		SELECT kid, algorithm, public_key, private_key_sealed, created_at, retired_at
		FROM signing_keys
		WHERE revoked_at IS NULL AND (retired_at IS NULL OR retired_at > now() - make_interval(secs => $1))
		ORDER BY created_at DESC, kid`, keep.Seconds())
	return scanAll(rows, err, "list signing keys", "signing key", nil, func(row pgx.Row) (SigningKey, error) {
		var k SigningKey
		err := row.Scan(&k.KID, &k.Algorithm, &k.PublicKey, &k.PrivateKeySealed, &k.CreatedAt, &k.RetiredAt)
		return k, err
	})
}
