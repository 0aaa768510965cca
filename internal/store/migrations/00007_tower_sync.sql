-- +goose Up

-- The mobile SDK API (DESIGN §4.8): sessions with towers, the per-tower command log the
-- cloud sends through the phones, and what a tower reported back.

-- Which session claims a client may ask for; NULL: the service's default
-- (LOCKERNET_SDK_DEFAULT_CLAIMS).
ALTER TABLE api_clients ADD COLUMN sdk_claims text[];

-- A tower reports the commands it applied in a sync_commands event, which names a command
-- number instead of a locker (locker_id is 0 for it).
ALTER TABLE tower_events DROP CONSTRAINT tower_events_kind_check;
ALTER TABLE tower_events ADD CONSTRAINT tower_events_kind_check
    CHECK (kind IN ('token_used', 'door_opened', 'door_closed', 'sync_commands'));
ALTER TABLE tower_events ADD COLUMN command_number bigint;

-- Every session payload the cloud sealed for a tower: who asked, with which claims.
CREATE TABLE tower_sessions (
    id               uuid PRIMARY KEY,
    tower_id         text NOT NULL REFERENCES towers (id),
    organization_id  bigint NOT NULL REFERENCES organizations (id),
    client_id        text NOT NULL,
    user_id          text,
    claims           text[] NOT NULL,
    permission       integer NOT NULL,
    firmware_version text,
    issued_at        timestamptz NOT NULL,
    expires_at       timestamptz NOT NULL
);
CREATE INDEX tower_sessions_tower ON tower_sessions (tower_id, issued_at DESC);

-- The command log of each tower. head is the last number written; acked the last number the
-- tower reported applied. The head row is locked (by its upsert) to number a command, always
-- after the locker rows of the same transaction, so numbers follow commit order.
CREATE TABLE tower_command_heads (
    tower_id text PRIMARY KEY REFERENCES towers (id),
    head     bigint NOT NULL DEFAULT 0,
    acked    bigint NOT NULL DEFAULT 0,
    acked_at timestamptz
);

CREATE TABLE tower_commands (
    tower_id   text NOT NULL REFERENCES towers (id),
    number     bigint NOT NULL CHECK (number > 0),
    kind       text NOT NULL CHECK (kind IN ('generation_floor', 'service_state', 'events_ack')),
    arg1       bigint NOT NULL,
    arg2       bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tower_id, number)
);

-- Per tower and boot epoch: every event 1..stored_through is stored; the last events_ack
-- command written acknowledged them up to acked_through.
CREATE TABLE tower_event_acks (
    tower_id       text NOT NULL REFERENCES towers (id),
    boot_epoch     bigint NOT NULL,
    stored_through bigint NOT NULL DEFAULT 0,
    acked_through  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tower_id, boot_epoch)
);

-- A phone reported that a tower's event log was reset (POST .../reset-events): the events not
-- yet uploaded are lost and a new boot epoch follows. Kept for operators.
CREATE TABLE tower_event_resets (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tower_id        text NOT NULL REFERENCES towers (id),
    organization_id bigint NOT NULL REFERENCES organizations (id),
    client_id       text NOT NULL,
    user_id         text,
    reason          text NOT NULL,
    repeats         integer NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tower_event_resets_tower ON tower_event_resets (tower_id, created_at DESC);

-- +goose Down
DROP TABLE tower_event_resets;
DROP TABLE tower_event_acks;
DROP TABLE tower_commands;
DROP TABLE tower_command_heads;
DROP TABLE tower_sessions;
ALTER TABLE tower_events DROP COLUMN command_number;
DELETE FROM tower_events WHERE kind = 'sync_commands';
ALTER TABLE tower_events DROP CONSTRAINT tower_events_kind_check;
ALTER TABLE tower_events ADD CONSTRAINT tower_events_kind_check
    CHECK (kind IN ('token_used', 'door_opened', 'door_closed'));
ALTER TABLE api_clients DROP COLUMN sdk_claims;
