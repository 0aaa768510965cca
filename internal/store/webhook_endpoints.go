package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// WebhookEndpoint is a receiver an organization (or one of its sub-organizations) registered.
type WebhookEndpoint struct {
	ID                   uuid.UUID
	OrgID                int64
	SubOrgID             *int64
	URL                  string
	Description          string
	EventTypes           []string
	Enabled              bool
	DisabledReason       *string
	SecretSealed         []byte
	PreviousSecretSealed []byte
	PreviousSecretUntil  *time.Time
	CreatedAt, UpdatedAt time.Time
}

// WebhookScope is who manages endpoints: an organization-wide key (SubOrgID nil) sees every
// endpoint of the organization, a sub-organization key only its sub-organization's.
type WebhookScope struct {
	OrgID    int64
	SubOrgID *int64
}

const endpointColumns = `id, organization_id, sub_organization_id, url, description, event_types, enabled, disabled_reason,
	secret_sealed, previous_secret_sealed, previous_secret_until, created_at, updated_at`

func scanEndpoint(row pgx.Row) (WebhookEndpoint, error) {
	var e WebhookEndpoint
	err := row.Scan(&e.ID, &e.OrgID, &e.SubOrgID, &e.URL, &e.Description, &e.EventTypes, &e.Enabled, &e.DisabledReason,
		&e.SecretSealed, &e.PreviousSecretSealed, &e.PreviousSecretUntil, &e.CreatedAt, &e.UpdatedAt)
	return e, err
}

// scopeClause limits a query on webhook_endpoints (alias e) to sc, with $1 the organization
// and $2 the sub-organization.
const scopeClause = `e.organization_id = $1 AND e.deleted_at IS NULL AND ($2::bigint IS NULL OR e.sub_organization_id = $2)`

// CreateWebhookEndpoint stores a new endpoint.
func (s *Store) CreateWebhookEndpoint(ctx context.Context, e WebhookEndpoint) (WebhookEndpoint, error) {
	if e.EventTypes == nil {
		e.EventTypes = []string{}
	}
	out, err := scanEndpoint(s.db.QueryRow(ctx, `
		INSERT INTO webhook_endpoints (id, organization_id, sub_organization_id, url, description, event_types, enabled, secret_sealed)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		RETURNING `+endpointColumns,
		e.ID, e.OrgID, e.SubOrgID, e.URL, e.Description, e.EventTypes, e.Enabled, e.SecretSealed))
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("create webhook endpoint: %w", translate(err))
	}
	s.forgetHookedOrgs()
	return out, nil
}

// WebhookEndpoints lists the endpoints sc manages, oldest first.
func (s *Store) WebhookEndpoints(ctx context.Context, sc WebhookScope) ([]WebhookEndpoint, error) {
	return listRows(ctx, s, "webhook endpoints", func(r pgx.CollectableRow) (WebhookEndpoint, error) { return scanEndpoint(r) },
		`SELECT `+endpointColumns+` FROM webhook_endpoints e WHERE `+scopeClause+`
		ORDER BY created_at, id LIMIT 1000`, sc.OrgID, sc.SubOrgID)
}

// WebhookEndpoint returns one endpoint sc manages (ErrNotFound otherwise).
func (s *Store) WebhookEndpoint(ctx context.Context, sc WebhookScope, id uuid.UUID) (WebhookEndpoint, error) {
	e, err := scanEndpoint(s.db.QueryRow(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints e WHERE `+scopeClause+` AND e.id = $3`,
		sc.OrgID, sc.SubOrgID, id))
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("webhook endpoint: %w", translate(err))
	}
	return e, nil
}

// WebhookEndpointPatch holds the fields an update changes (nil: unchanged).
type WebhookEndpointPatch struct {
	URL         *string
	Description *string
	EventTypes  *[]string
	Enabled     *bool
}

// UpdateWebhookEndpoint changes an endpoint sc manages. Enabling it again clears the reason
// it was disabled and its run of failures.
func (s *Store) UpdateWebhookEndpoint(ctx context.Context, sc WebhookScope, id uuid.UUID, p WebhookEndpointPatch) (WebhookEndpoint, error) {
	var types []string
	if p.EventTypes != nil {
		types = *p.EventTypes
		if types == nil {
			types = []string{}
		}
	}
	e, err := scanEndpoint(s.db.QueryRow(ctx, `
		UPDATE webhook_endpoints e SET
		    url = coalesce($4, url), description = coalesce($5, description),
		    event_types = CASE WHEN $6 THEN $7::text[] ELSE event_types END,
		    enabled = coalesce($8, enabled),
		    disabled_reason = CASE WHEN $8 THEN NULL ELSE disabled_reason END,
		    failing_since = CASE WHEN $8 THEN NULL ELSE failing_since END,
		    updated_at = now()
		WHERE `+scopeClause+` AND e.id = $3
		RETURNING `+endpointColumns,
		sc.OrgID, sc.SubOrgID, id, p.URL, p.Description, p.EventTypes != nil, types, p.Enabled))
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("update webhook endpoint: %w", translate(err))
	}
	return e, nil
}

// DeleteWebhookEndpoint removes an endpoint sc manages; its pending deliveries end as failed
// and their workflows stop at their next attempt.
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, sc WebhookScope, id uuid.UUID) error {
	var n int
	err := s.db.QueryRow(ctx, `
		WITH del AS (
		    UPDATE webhook_endpoints e SET deleted_at = now(), enabled = false, updated_at = now()
		    WHERE `+scopeClause+` AND e.id = $3 RETURNING e.id
		), ended AS (
		    UPDATE webhook_deliveries d SET status = 'failed', last_error = 'endpoint deleted', next_attempt_at = NULL,
		        completed_at = now()
		    FROM del WHERE d.endpoint_id = del.id AND d.status = 'pending'
		)
		SELECT count(*) FROM del`, sc.OrgID, sc.SubOrgID, id).Scan(&n)
	if err != nil {
		return fmt.Errorf("delete webhook endpoint: %w", translate(err))
	}
	if n == 0 {
		return fmt.Errorf("delete webhook endpoint: %w", ErrNotFound)
	}
	return nil
}

// RotateWebhookSecret makes sealed the endpoint's secret; the old one keeps signing until
// until.
func (s *Store) RotateWebhookSecret(ctx context.Context, sc WebhookScope, id uuid.UUID, sealed []byte, until time.Time) error {
	return s.execOne(ctx, "rotate webhook secret", `
		UPDATE webhook_endpoints e SET previous_secret_sealed = secret_sealed, previous_secret_until = $5,
		    secret_sealed = $4, updated_at = now()
		WHERE `+scopeClause+` AND e.id = $3`, sc.OrgID, sc.SubOrgID, id, sealed, until)
}
