-- +goose Up

-- App engine API keys (x-api-key). An org-wide key (no sub-organization) is an admin key:
-- it may create and delete keys. Only the SHA-256 of a key is kept; prefix is what lists show.
CREATE TABLE app_api_keys (
    id                  uuid PRIMARY KEY,
    organization_id     bigint NOT NULL REFERENCES organizations (id),
    sub_organization_id bigint REFERENCES sub_organizations (id),
    key_hash            bytea NOT NULL UNIQUE,
    prefix              text NOT NULL,
    client_id           text REFERENCES api_clients (client_id),
    created_at          timestamptz NOT NULL DEFAULT now(),
    last_used_at        timestamptz,
    deleted_at          timestamptz
);
CREATE INDEX app_api_keys_org ON app_api_keys (organization_id, sub_organization_id, created_at);

-- Access codes: six digits that open a gateway locker. The code is kept encrypted (AES-GCM
-- under the access-code key) and found by a keyed hash (HMAC-SHA256 of "pickup-code:" and the
-- code, under the "access-code-lookup" key derived from the master key; the location is not in
-- the hash, the unique index pairs it with the location), unique among a location's active
-- codes.
CREATE TABLE access_codes (
    id                  uuid PRIMARY KEY,
    organization_id     bigint NOT NULL REFERENCES organizations (id),
    sub_organization_id bigint REFERENCES sub_organizations (id),
    location_id         bigint NOT NULL REFERENCES locations (id),
    gateway_id          bigint NOT NULL,
    locker_id           integer NOT NULL,
    locker_name         text NOT NULL,
    code_sealed         bytea NOT NULL,
    code_hash           bytea NOT NULL,
    single_use          boolean NOT NULL,
    status              text NOT NULL CHECK (status IN ('active', 'used', 'removed', 'expired')),
    expires_at          timestamptz NOT NULL,
    created_by_key      uuid REFERENCES app_api_keys (id),
    created_at          timestamptz NOT NULL DEFAULT now(),
    ended_at            timestamptz,
    used_at             timestamptz
);
CREATE UNIQUE INDEX access_codes_active_code ON access_codes (location_id, code_hash) WHERE status = 'active';
CREATE INDEX access_codes_locker ON access_codes (location_id, locker_name) WHERE status = 'active';
CREATE INDEX access_codes_sub_org ON access_codes (organization_id, sub_organization_id) WHERE status = 'active';

-- Failed access-code attempts per (key, location), for the guessing limit.
CREATE TABLE access_code_failures (
    key_id      uuid NOT NULL,
    location_id bigint NOT NULL,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX access_code_failures_window ON access_code_failures (key_id, location_id, at);

-- The organization transaction list filters on these; each is an equality filter next to
-- the organization, newest first.
CREATE INDEX transactions_org_type ON transactions (organization_id, type, created_at DESC, id DESC);
CREATE INDEX transactions_org_order_ref ON transactions (organization_id, order_reference);
CREATE INDEX transactions_org_pickup_code ON transactions (organization_id, pickup_code_hash) WHERE pickup_code_hash IS NOT NULL;
CREATE INDEX transactions_org_locker ON transactions (organization_id, lower(locker_number));
CREATE INDEX transactions_org_tower ON transactions (organization_id, lower(tower_name));
CREATE INDEX transactions_org_location ON transactions (organization_id, lower(location_name));
CREATE INDEX transactions_org_city ON transactions (organization_id, lower(city));
CREATE INDEX transactions_org_pin ON transactions (organization_id, pin_code);
CREATE INDEX transactions_sub_org ON transactions (organization_id, sub_organization_id, created_at DESC, id DESC);

-- +goose Down
DROP INDEX transactions_sub_org;
DROP INDEX transactions_org_pin;
DROP INDEX transactions_org_city;
DROP INDEX transactions_org_location;
DROP INDEX transactions_org_tower;
DROP INDEX transactions_org_locker;
DROP INDEX transactions_org_pickup_code;
DROP INDEX transactions_org_order_ref;
DROP INDEX transactions_org_type;
DROP TABLE access_code_failures;
DROP TABLE access_codes;
DROP TABLE app_api_keys;
