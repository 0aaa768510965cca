-- +goose Up

-- The alerts of the gateways' watches of their lock controllers (GET /alerts of the local
-- API: door_ajar, forced_open, item_left, controller_offline, controller_online), picked up
-- by the worker's gateway_alerts loop (internal/gatewayalerts) with one long poll per online
-- gateway. gateway_alert_cursors holds, per gateway, the last seq taken and the lease of the
-- process polling it (leased_by, leased_until), so one worker at a time polls a gateway.
-- gateway_alerts holds each alert once: its key (gateway_id, seq) is what makes a second
-- pickup of the same alert — a lease that lapsed mid-poll — record no second event.
CREATE TABLE gateway_alert_cursors (
    gateway_id   bigint PRIMARY KEY REFERENCES gateways (id) ON DELETE CASCADE,
    last_seq     bigint NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    leased_by    text,
    leased_until timestamptz NOT NULL DEFAULT '-infinity',
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX gateway_alert_cursors_lease ON gateway_alert_cursors (leased_until);

CREATE TABLE gateway_alerts (
    gateway_id    bigint NOT NULL REFERENCES gateways (id) ON DELETE CASCADE,
    seq           bigint NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('door_ajar', 'forced_open', 'item_left', 'controller_offline', 'controller_online')),
    location_id   bigint NOT NULL REFERENCES locations (id),
    locker_id     integer,
    locker_name   text,
    bank_id       integer NOT NULL,
    controller_id text NOT NULL,
    alerted_at    timestamptz NOT NULL,
    message       text NOT NULL,
    received_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (gateway_id, seq)
);
CREATE INDEX gateway_alerts_received ON gateway_alerts (received_at);

-- +goose Down
DROP TABLE gateway_alerts;
DROP TABLE gateway_alert_cursors;
