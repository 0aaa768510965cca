-- +goose Up

-- Webhooks (DESIGN §10): endpoints an organization (or one of its sub-organizations)
-- registers, the events recorded in the same transaction as the change they report, and one
-- delivery per (endpoint, event), each driven by its webhook-delivery workflow.
CREATE TABLE webhook_endpoints (
    id                     uuid PRIMARY KEY,
    organization_id        bigint NOT NULL REFERENCES organizations (id),
    sub_organization_id    bigint REFERENCES sub_organizations (id),
    url                    text NOT NULL,
    description            text NOT NULL DEFAULT '',
    -- empty: every event type
    event_types            text[] NOT NULL DEFAULT '{}',
    enabled                boolean NOT NULL DEFAULT true,
    disabled_reason        text,
    -- the signing secret, sealed with the master key (purpose webhook-secret:<id>)
    secret_sealed          bytea NOT NULL,
    -- during a rotation the previous secret signs too, until previous_secret_until
    previous_secret_sealed bytea,
    previous_secret_until  timestamptz,
    -- when the oldest of an unbroken run of failed deliveries was created (NULL: the last
    -- delivery succeeded); five days of failures disable the endpoint
    failing_since          timestamptz,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    deleted_at             timestamptz
);
CREATE INDEX webhook_endpoints_org ON webhook_endpoints (organization_id, created_at, id) WHERE deleted_at IS NULL;

CREATE TABLE webhook_events (
    id                  uuid PRIMARY KEY,
    organization_id     bigint NOT NULL REFERENCES organizations (id),
    sub_organization_id bigint,
    type                text NOT NULL,
    data                jsonb NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_events_org ON webhook_events (organization_id, created_at DESC, id DESC);
CREATE INDEX webhook_events_created ON webhook_events (created_at);

CREATE TABLE webhook_deliveries (
    id               uuid PRIMARY KEY,
    endpoint_id      uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id         uuid NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    organization_id  bigint NOT NULL,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    last_status_code integer,
    last_error       text,
    next_attempt_at  timestamptz,
    -- redeliveries asked for through the API; each runs as its own workflow
    round            integer NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    UNIQUE (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (endpoint_id, created_at) WHERE status = 'pending';

-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE webhook_events;
DROP TABLE webhook_endpoints;
