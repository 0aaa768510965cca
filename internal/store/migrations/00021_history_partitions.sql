-- +goose Up

-- Append-only, time-ordered history (DESIGN §11) in native range partitions, one per calendar
-- month (UTC), named <table>_pYYYYMM, plus <table>_default for rows outside every month
-- created (a row written with a date months away, e.g. by a backfill). The worker's
-- history_partitions loop creates the months ahead and drops those past their retention
-- (internal/sweeper/history.go); a month is dropped whole, never deleted row by row.
--
-- Partition keys and the keys that must include them:
--   tower_events       tower_time  (tower_id, boot_epoch, seq, tower_time): the time is signed
--                      with the event, so a replayed event carries the same one and is still
--                      recognised as a duplicate (ON CONFLICT DO NOTHING).
--   transactions       created_at  (id, created_at); one row per gateway request is
--                      (request_id, created_at), created_at being the request's own.
--   webhook_events     created_at  (id, created_at)
--   webhook_deliveries created_at  (id, created_at); a delivery is written in the statement that
--                      writes its event, with the event's created_at, so an event and its
--                      deliveries are always in the same month and their partitions are dropped
--                      together (deliveries first). The foreign key to webhook_events is gone:
--                      a key on a partitioned table must carry the partition key, and nothing
--                      deletes events but the drop of their month.
--
-- Reservations, locker tokens and gateway requests stay unpartitioned: they are read and
-- updated by id while active and are referenced by other tables (token_uses,
-- locker_open_requests, gateway_idempotency_keys); gateway requests past their retention are
-- pruned by the gateway_request_prune loop.

-- history_partition_add creates parent's partition for the month starting at month (UTC) unless
-- it exists. Rows of that month already in the default partition move into it. It is built
-- standalone and attached (ATTACH takes a SHARE UPDATE EXCLUSIVE lock on the parent, not the
-- ACCESS EXCLUSIVE lock of CREATE TABLE ... PARTITION OF), so writers carry on meanwhile.
-- +goose StatementBegin
CREATE FUNCTION history_partition_add(parent text, month date) RETURNS boolean
    LANGUAGE plpgsql
AS $$
DECLARE
    part text := parent || '_p' || to_char(month, 'YYYYMM');
    dflt text := parent || '_default';
    col  text;
    lo   timestamptz := date_trunc('month', month)::timestamp AT TIME ZONE 'UTC';
    hi   timestamptz := (date_trunc('month', month) + interval '1 month')::timestamp AT TIME ZONE 'UTC';
BEGIN
    IF to_regclass(part) IS NOT NULL THEN
        RETURN false;
    END IF;
    SELECT a.attname INTO STRICT col
    FROM pg_partitioned_table p JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0]
    WHERE p.partrelid = parent::regclass;
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, parent);
    IF to_regclass(dflt) IS NOT NULL THEN
        EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I >= $1 AND %I < $2 RETURNING *) INSERT INTO %I SELECT * FROM moved',
                       dflt, col, col, part) USING lo, hi;
    END IF;
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', parent, part, lo, hi);
    RETURN true;
END
$$;
-- +goose StatementEnd

-- history_partition_range creates parent's months from the one holding since (at most two
-- years back) through the one holding until.
-- +goose StatementBegin
CREATE FUNCTION history_partition_range(parent text, since timestamptz, until timestamptz) RETURNS integer
    LANGUAGE plpgsql
AS $$
DECLARE
    m date := date_trunc('month', greatest(coalesce(since, now()), now() - interval '2 years') AT TIME ZONE 'UTC')::date;
    n integer := 0;
BEGIN
    WHILE m <= (until AT TIME ZONE 'UTC')::date LOOP
        IF history_partition_add(parent, m) THEN
            n := n + 1;
        END IF;
        m := (m + interval '1 month')::date;
    END LOOP;
    RETURN n;
END
$$;
-- +goose StatementEnd

-- Each table: the old one renamed, a partitioned one in its place with the same columns,
-- checks and defaults, its months from the oldest row's through two months ahead, the rows
-- copied, the old table dropped, then keys and indexes (built once over the copied rows).

ALTER TABLE tower_events RENAME TO tower_events_unpartitioned;
CREATE TABLE tower_events (LIKE tower_events_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (tower_time);
CREATE TABLE tower_events_default PARTITION OF tower_events DEFAULT;
SELECT history_partition_range('tower_events', (SELECT min(tower_time) FROM tower_events_unpartitioned), now() + interval '2 months');
INSERT INTO tower_events SELECT * FROM tower_events_unpartitioned;
DROP TABLE tower_events_unpartitioned;
ALTER TABLE tower_events ADD PRIMARY KEY (tower_id, boot_epoch, seq, tower_time);
ALTER TABLE tower_events ADD FOREIGN KEY (tower_id) REFERENCES towers (id);
CREATE INDEX tower_events_locker ON tower_events (tower_id, boot_epoch, locker_id, seq);

ALTER TABLE transactions RENAME TO transactions_unpartitioned;
CREATE TABLE transactions (LIKE transactions_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (created_at);
CREATE TABLE transactions_default PARTITION OF transactions DEFAULT;
SELECT history_partition_range('transactions', (SELECT min(created_at) FROM transactions_unpartitioned), now() + interval '2 months');
INSERT INTO transactions SELECT * FROM transactions_unpartitioned;
DROP TABLE transactions_unpartitioned;
ALTER TABLE transactions ADD PRIMARY KEY (id, created_at);
ALTER TABLE transactions ADD FOREIGN KEY (organization_id) REFERENCES organizations (id);
ALTER TABLE transactions ADD FOREIGN KEY (sub_organization_id) REFERENCES sub_organizations (id);
ALTER TABLE transactions ADD FOREIGN KEY (location_id) REFERENCES locations (id);
CREATE INDEX transactions_org_created ON transactions (organization_id, created_at DESC, id DESC);
CREATE INDEX transactions_org_type ON transactions (organization_id, type, created_at DESC, id DESC);
CREATE INDEX transactions_org_order_ref ON transactions (organization_id, order_reference);
CREATE INDEX transactions_org_pickup_code ON transactions (organization_id, pickup_code_hash) WHERE pickup_code_hash IS NOT NULL;
CREATE INDEX transactions_org_locker ON transactions (organization_id, lower(locker_number));
CREATE INDEX transactions_org_tower ON transactions (organization_id, lower(tower_name));
CREATE INDEX transactions_org_location ON transactions (organization_id, lower(location_name));
CREATE INDEX transactions_org_city ON transactions (organization_id, lower(city));
CREATE INDEX transactions_org_pin ON transactions (organization_id, pin_code);
CREATE INDEX transactions_sub_org ON transactions (organization_id, sub_organization_id, created_at DESC, id DESC);
CREATE UNIQUE INDEX transactions_request ON transactions (request_id, created_at) WHERE request_id IS NOT NULL;

ALTER TABLE webhook_deliveries RENAME TO webhook_deliveries_unpartitioned;
ALTER TABLE webhook_events RENAME TO webhook_events_unpartitioned;
CREATE TABLE webhook_events (LIKE webhook_events_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (created_at);
CREATE TABLE webhook_events_default PARTITION OF webhook_events DEFAULT;
CREATE TABLE webhook_deliveries (LIKE webhook_deliveries_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (created_at);
CREATE TABLE webhook_deliveries_default PARTITION OF webhook_deliveries DEFAULT;
SELECT history_partition_range('webhook_events', (SELECT min(created_at) FROM webhook_events_unpartitioned), now() + interval '2 months');
SELECT history_partition_range('webhook_deliveries', (SELECT min(created_at) FROM webhook_events_unpartitioned), now() + interval '2 months');
INSERT INTO webhook_events SELECT * FROM webhook_events_unpartitioned;
-- A delivery takes its event's created_at (written in the same statement, they were equal).
INSERT INTO webhook_deliveries (id, endpoint_id, event_id, organization_id, status, attempts, last_status_code, last_error,
                                next_attempt_at, round, created_at, completed_at)
SELECT d.id, d.endpoint_id, d.event_id, d.organization_id, d.status, d.attempts, d.last_status_code, d.last_error,
       d.next_attempt_at, d.round, ev.created_at, d.completed_at
FROM webhook_deliveries_unpartitioned d JOIN webhook_events_unpartitioned ev ON ev.id = d.event_id;
DROP TABLE webhook_deliveries_unpartitioned;
DROP TABLE webhook_events_unpartitioned;
ALTER TABLE webhook_events ADD PRIMARY KEY (id, created_at);
ALTER TABLE webhook_events ADD FOREIGN KEY (organization_id) REFERENCES organizations (id);
CREATE INDEX webhook_events_org ON webhook_events (organization_id, created_at DESC, id DESC);
CREATE INDEX webhook_events_created ON webhook_events (created_at);
ALTER TABLE webhook_deliveries ADD PRIMARY KEY (id, created_at);
ALTER TABLE webhook_deliveries ADD UNIQUE (endpoint_id, event_id, created_at);
ALTER TABLE webhook_deliveries ADD FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints (id) ON DELETE CASCADE;
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (endpoint_id, created_at) WHERE status = 'pending';

-- +goose Down
-- Back to plain tables (the rows kept; webhook_deliveries regains its key to webhook_events).
ALTER TABLE webhook_deliveries RENAME TO webhook_deliveries_partitioned;
ALTER TABLE webhook_events RENAME TO webhook_events_partitioned;
CREATE TABLE webhook_events (LIKE webhook_events_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
INSERT INTO webhook_events SELECT * FROM webhook_events_partitioned;
CREATE TABLE webhook_deliveries (LIKE webhook_deliveries_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
INSERT INTO webhook_deliveries SELECT * FROM webhook_deliveries_partitioned;
DROP TABLE webhook_deliveries_partitioned;
DROP TABLE webhook_events_partitioned;
ALTER TABLE webhook_events ADD PRIMARY KEY (id);
ALTER TABLE webhook_events ADD FOREIGN KEY (organization_id) REFERENCES organizations (id);
CREATE INDEX webhook_events_org ON webhook_events (organization_id, created_at DESC, id DESC);
CREATE INDEX webhook_events_created ON webhook_events (created_at);
ALTER TABLE webhook_deliveries ADD PRIMARY KEY (id);
ALTER TABLE webhook_deliveries ADD UNIQUE (endpoint_id, event_id);
ALTER TABLE webhook_deliveries ADD FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints (id) ON DELETE CASCADE;
ALTER TABLE webhook_deliveries ADD FOREIGN KEY (event_id) REFERENCES webhook_events (id) ON DELETE CASCADE;
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (endpoint_id, created_at) WHERE status = 'pending';

ALTER TABLE transactions RENAME TO transactions_partitioned;
CREATE TABLE transactions (LIKE transactions_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
INSERT INTO transactions SELECT * FROM transactions_partitioned;
DROP TABLE transactions_partitioned;
ALTER TABLE transactions ADD PRIMARY KEY (id);
ALTER TABLE transactions ADD FOREIGN KEY (organization_id) REFERENCES organizations (id);
ALTER TABLE transactions ADD FOREIGN KEY (sub_organization_id) REFERENCES sub_organizations (id);
ALTER TABLE transactions ADD FOREIGN KEY (location_id) REFERENCES locations (id);
CREATE INDEX transactions_org_created ON transactions (organization_id, created_at DESC, id DESC);
CREATE INDEX transactions_org_type ON transactions (organization_id, type, created_at DESC, id DESC);
CREATE INDEX transactions_org_order_ref ON transactions (organization_id, order_reference);
CREATE INDEX transactions_org_pickup_code ON transactions (organization_id, pickup_code_hash) WHERE pickup_code_hash IS NOT NULL;
CREATE INDEX transactions_org_locker ON transactions (organization_id, lower(locker_number));
CREATE INDEX transactions_org_tower ON transactions (organization_id, lower(tower_name));
CREATE INDEX transactions_org_location ON transactions (organization_id, lower(location_name));
CREATE INDEX transactions_org_city ON transactions (organization_id, lower(city));
CREATE INDEX transactions_org_pin ON transactions (organization_id, pin_code);
CREATE INDEX transactions_sub_org ON transactions (organization_id, sub_organization_id, created_at DESC, id DESC);
CREATE UNIQUE INDEX transactions_request ON transactions (request_id) WHERE request_id IS NOT NULL;

ALTER TABLE tower_events RENAME TO tower_events_partitioned;
CREATE TABLE tower_events (LIKE tower_events_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
INSERT INTO tower_events SELECT * FROM tower_events_partitioned;
DROP TABLE tower_events_partitioned;
ALTER TABLE tower_events ADD PRIMARY KEY (tower_id, boot_epoch, seq);
ALTER TABLE tower_events ADD FOREIGN KEY (tower_id) REFERENCES towers (id);
CREATE INDEX tower_events_locker ON tower_events (tower_id, boot_epoch, locker_id, seq);

DROP FUNCTION history_partition_range(text, timestamptz, timestamptz);
DROP FUNCTION history_partition_add(text, date);
