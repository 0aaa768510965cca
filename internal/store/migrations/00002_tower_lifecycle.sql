-- +goose Up

-- A locker taken out of service while occupied keeps its possession (the item is inside);
-- returning it to service restores occupied.
ALTER TABLE lockers ADD COLUMN kept_possession boolean NOT NULL DEFAULT false;

-- Locker tokens: drop-off, pickup and release. Each carries the generation of the possession
-- it was issued in; the tower refuses older generations.
CREATE TABLE locker_tokens (
    id              uuid PRIMARY KEY,
    organization_id bigint NOT NULL REFERENCES organizations (id),
    client_id       text NOT NULL REFERENCES api_clients (client_id),
    locker_id       bigint NOT NULL REFERENCES lockers (id),
    tower_id        text NOT NULL REFERENCES towers (id),
    type            text NOT NULL CHECK (type IN ('dropoff', 'pickup', 'release')),
    generation      integer NOT NULL,
    client_info     text,
    status          text NOT NULL CHECK (status IN ('active', 'used', 'expired', 'revoked')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    used_at         timestamptz
);
CREATE INDEX locker_tokens_locker ON locker_tokens (locker_id, generation);
CREATE INDEX locker_tokens_active_expiry ON locker_tokens (expires_at) WHERE status = 'active';

-- Every event a tower signed, as uploaded by the SDK. (tower, boot epoch, sequence) identifies
-- an event, so a replayed batch changes nothing twice.
CREATE TABLE tower_events (
    tower_id    text NOT NULL REFERENCES towers (id),
    boot_epoch  bigint NOT NULL,
    seq         bigint NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('token_used', 'door_opened', 'door_closed')),
    tower_time  timestamptz NOT NULL,
    locker_id   bigint NOT NULL,
    token_id    uuid,
    generation  integer NOT NULL,
    item_inside boolean NOT NULL DEFAULT false,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tower_id, boot_epoch, seq)
);
CREATE INDEX tower_events_locker ON tower_events (tower_id, boot_epoch, locker_id, seq);

-- A used token's effect is applied once: the row is written when its use (the token_used
-- event and the door_closed that follows it) has been applied.
CREATE TABLE token_uses (
    token_id    uuid PRIMARY KEY REFERENCES locker_tokens (id),
    tower_id    text NOT NULL,
    boot_epoch  bigint NOT NULL,
    used_seq    bigint NOT NULL,
    closed_seq  bigint NOT NULL,
    item_inside boolean NOT NULL,
    outcome     text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- Events that could not be applied (stale generation, unknown token, use after expiry):
-- kept for operators.
CREATE TABLE tower_anomalies (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tower_id    text NOT NULL,
    locker_id   bigint,
    token_id    uuid,
    kind        text NOT NULL,
    detail      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Transactions of an organization: tower drop-offs and pickups now; access-code opens and
-- closes and gateway transactions later. The app engine's transaction list reads this table.
CREATE TABLE transactions (
    id                  uuid PRIMARY KEY,
    organization_id     bigint NOT NULL REFERENCES organizations (id),
    sub_organization_id bigint REFERENCES sub_organizations (id),
    type                text NOT NULL,
    status              text NOT NULL,
    order_reference     text,
    pickup_code_hash    bytea,
    pickup_code_last2   text,
    location_id         bigint REFERENCES locations (id),
    location_name       text,
    city                text,
    pin_code            text,
    tower_id            text,
    tower_name          text,
    locker_id           bigint,
    locker_number       text,
    client_id           text,
    client_info         text,
    token_id            uuid,
    created_at          timestamptz NOT NULL DEFAULT now(),
    completed_at        timestamptz
);
CREATE INDEX transactions_org_created ON transactions (organization_id, created_at DESC, id DESC);

-- Locker-open links (Harbor's deep-link flow): a drop-off or pickup token wrapped for a link.
CREATE TABLE locker_open_requests (
    id              uuid PRIMARY KEY,
    organization_id bigint NOT NULL REFERENCES organizations (id),
    client_id       text NOT NULL REFERENCES api_clients (client_id),
    type            text NOT NULL CHECK (type IN ('dropoff', 'pickup')),
    token_id        uuid NOT NULL REFERENCES locker_tokens (id),
    locker_id       bigint NOT NULL REFERENCES lockers (id),
    tower_id        text NOT NULL REFERENCES towers (id),
    location_id     bigint NOT NULL REFERENCES locations (id),
    return_url      text NOT NULL DEFAULT '',
    client_info     text,
    payload         jsonb,
    link_token      text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL
);

-- +goose Down
DROP TABLE locker_open_requests;
DROP TABLE transactions;
DROP TABLE tower_anomalies;
DROP TABLE token_uses;
DROP TABLE tower_events;
DROP TABLE locker_tokens;
ALTER TABLE lockers DROP COLUMN kept_possession;
