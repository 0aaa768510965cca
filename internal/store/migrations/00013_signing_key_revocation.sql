-- +goose Up

-- A revoked signing key verifies nothing from then on and leaves the JWKS at once, unlike a
-- retired one, which keeps verifying the tokens it signed until they expire. For a key that
-- leaked.
ALTER TABLE signing_keys ADD COLUMN revoked_at timestamptz;

-- +goose Down
ALTER TABLE signing_keys DROP COLUMN revoked_at;
