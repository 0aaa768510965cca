package store

import (
	"context"
	"fmt"
)

// EnsureOrganization returns the organization with this name, creating it if missing.
func (s *Store) EnsureOrganization(ctx context.Context, name string) (Organization, error) {
	o := Organization{Name: name}
	err := s.db.QueryRow(ctx, `
		INSERT INTO organizations (name) VALUES ($1)
		ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
		RETURNING id`, name).Scan(&o.ID)
	if err != nil {
		return Organization{}, fmt.Errorf("ensure organization: %w", translate(err))
	}
	return o, nil
}

// Organization returns one organization.
func (s *Store) Organization(ctx context.Context, id int64) (Organization, error) {
	o := Organization{ID: id}
	if err := s.db.QueryRow(ctx, `SELECT name FROM organizations WHERE id = $1`, id).Scan(&o.Name); err != nil {
		return Organization{}, fmt.Errorf("get organization: %w", translate(err))
	}
	return o, nil
}

// EnsureSubOrganization returns the sub-organization with this name, creating it if missing.
func (s *Store) EnsureSubOrganization(ctx context.Context, orgID int64, name string) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `
		INSERT INTO sub_organizations (organization_id, name) VALUES ($1, $2)
		ON CONFLICT (organization_id, name) DO UPDATE SET name = EXCLUDED.name
		RETURNING id`, orgID, name).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("ensure sub-organization: %w", translate(err))
	}
	return id, nil
}

// CreateClient stores a service-provider client; ErrConflict if the id is taken.
func (s *Store) CreateClient(ctx context.Context, c Client) error {
	return s.exec(ctx, "create client", `
		INSERT INTO api_clients (client_id, organization_id, name, secret_hash, scopes)
		VALUES ($1, $2, $3, $4, $5)`, c.ClientID, c.OrganizationID, c.Name, c.SecretHash, c.Scopes)
}

// SetClientSecret replaces a client's secret hash (the seed uses it to re-key on demand).
func (s *Store) SetClientSecret(ctx context.Context, clientID string, secretHash []byte) error {
	return s.execOne(ctx, "set client secret", `UPDATE api_clients SET secret_hash = $2 WHERE client_id = $1`, clientID, secretHash)
}

// ClientByID returns a client, disabled ones included (the caller decides).
func (s *Store) ClientByID(ctx context.Context, clientID string) (Client, error) {
	c := Client{ClientID: clientID}
	err := s.db.QueryRow(ctx, `
		SELECT organization_id, name, secret_hash, scopes, disabled_at IS NOT NULL
		FROM api_clients WHERE client_id = $1`, clientID).
		Scan(&c.OrganizationID, &c.Name, &c.SecretHash, &c.Scopes, &c.Disabled)
	if err != nil {
		return Client{}, fmt.Errorf("get client: %w", translate(err))
	}
	return c, nil
}

// SetClientDisabled disables a client (its token requests fail, the tokens it holds and the
// app keys it made stop working) or enables it again; ErrNotFound for an unknown client.
func (s *Store) SetClientDisabled(ctx context.Context, clientID string, disabled bool) error {
	return s.execOne(ctx, "set client disabled", `
		UPDATE api_clients SET disabled_at = CASE WHEN $2 THEN coalesce(disabled_at, now()) END
		WHERE client_id = $1`, clientID, disabled)
}

// SetClientRateLimits sets a client's own requests per minute on the tower API and the token
// endpoint (nil: the setting's default); ErrNotFound for an unknown client.
func (s *Store) SetClientRateLimits(ctx context.Context, clientID string, tower, token *int) error {
	return s.execOne(ctx, "set client rate limits", `UPDATE api_clients SET rate_limit = $2, token_rate_limit = $3 WHERE client_id = $1`, clientID, tower, token)
}
