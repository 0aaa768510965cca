-- +goose Up

-- Pickup windows (docs/pickup-windows.md). A policy belongs to an organization, and a
-- location may override it (location_id set). No policy: no windows, a possession lasts as
-- before. A window is opened by the drop-off that makes a locker occupied, in the same
-- transaction, with a snapshot of the policy then in force; its pickup-window/<id> workflow
-- (started from the outbox in that transaction) keeps its reminders and its end. At most one
-- window per locker is live (open, overdue or return_requested); a pickup closes it.
CREATE TABLE pickup_policies (
    organization_id          bigint NOT NULL REFERENCES organizations (id),
    location_id              bigint REFERENCES locations (id),
    window_seconds           integer NOT NULL CHECK (window_seconds BETWEEN 1 AND 2592000),
    reminder_offsets_seconds integer[] NOT NULL DEFAULT '{}',
    max_extensions           integer NOT NULL DEFAULT 0 CHECK (max_extensions BETWEEN 0 AND 10),
    extension_seconds        integer NOT NULL DEFAULT 0 CHECK (extension_seconds BETWEEN 0 AND 2592000),
    on_expiry                text NOT NULL DEFAULT 'notify' CHECK (on_expiry IN ('notify', 'request_return')),
    updated_at               timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX pickup_policies_org ON pickup_policies (organization_id) WHERE location_id IS NULL;
CREATE UNIQUE INDEX pickup_policies_location ON pickup_policies (location_id) WHERE location_id IS NOT NULL;

CREATE TABLE pickup_windows (
    id                       uuid PRIMARY KEY,
    organization_id          bigint NOT NULL REFERENCES organizations (id),
    location_id              bigint NOT NULL REFERENCES locations (id),
    tower_id                 text NOT NULL,
    locker_id                bigint NOT NULL REFERENCES lockers (id),
    client_id                text NOT NULL,
    dropoff_token_id         uuid NOT NULL,
    status                   text NOT NULL DEFAULT 'open'
                             CHECK (status IN ('open', 'overdue', 'return_requested', 'picked_up', 'returned')),
    opened_at                timestamptz NOT NULL,
    pickup_by                timestamptz NOT NULL,
    window_seconds           integer NOT NULL,
    reminder_offsets_seconds integer[] NOT NULL,
    reminders_sent           integer NOT NULL DEFAULT 0,
    max_extensions           integer NOT NULL,
    extensions_used          integer NOT NULL DEFAULT 0,
    extension_seconds        integer NOT NULL,
    on_expiry                text NOT NULL,
    overdue_at               timestamptz,
    return_requested_at      timestamptz,
    return_token_ids         uuid[] NOT NULL DEFAULT '{}',
    closed_at                timestamptz
);
CREATE UNIQUE INDEX pickup_windows_live ON pickup_windows (locker_id) WHERE closed_at IS NULL;
CREATE INDEX pickup_windows_location ON pickup_windows (location_id, status) WHERE closed_at IS NULL;
CREATE INDEX pickup_windows_locker ON pickup_windows (locker_id, opened_at DESC);
-- The due pass (MarkDuePickupWindows): open windows by their end.
CREATE INDEX pickup_windows_due ON pickup_windows (pickup_by) WHERE closed_at IS NULL AND status = 'open';

-- +goose Down
DROP TABLE pickup_windows;
DROP TABLE pickup_policies;
