-- +goose Up

-- Gateway requests with their stored outcomes (answer bodies up to 1 MiB) in monthly range
-- partitions by created_at, like the history tables of 00021: the history_partitions loop
-- creates the months ahead and drops those past LOCKERNET_RETENTION_GATEWAY_REQUESTS
-- (docs/data-lifecycle.md, decision 0013).
--
-- A key on a partitioned table must carry its partition key, so gateway_requests' key is
-- (id, created_at), which no longer says that an id is unique: the same id at two times would
-- be two rows. An id must be unique (a retried activity re-creates its request under the id
-- it derived and relies on the conflict, DESIGN §6.2), so each request's id is also claimed in
-- gateway_request_ids, a narrow plain table whose key is the id alone, written in the
-- statement that writes the request. It holds the request's created_at too: a lookup by id
-- reads it first (one index probe) and so finds the request's one partition (run-time
-- pruning) instead of probing every month's index. Its rows go, in batches, once their
-- request's month is dropped (PruneGatewayRequests).
--
-- Idempotency keys refer to the id claim (gateway_idempotency_keys.request_id), not to the
-- partitioned table; a key lives at most LOCKERNET_IDEMPOTENCY_TTL, which the retention is
-- never shorter than, so a live key's request is never in a month old enough to be dropped.

CREATE TABLE gateway_request_ids (
    id         uuid PRIMARY KEY,
    created_at timestamptz NOT NULL
);

ALTER TABLE gateway_idempotency_keys DROP CONSTRAINT gateway_idempotency_keys_request_id_fkey;

ALTER TABLE gateway_requests RENAME TO gateway_requests_unpartitioned;
CREATE TABLE gateway_requests (LIKE gateway_requests_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (created_at);
CREATE TABLE gateway_requests_default PARTITION OF gateway_requests DEFAULT;
SELECT history_partition_range('gateway_requests', (SELECT min(created_at) FROM gateway_requests_unpartitioned), now() + interval '2 months');
INSERT INTO gateway_request_ids (id, created_at) SELECT id, created_at FROM gateway_requests_unpartitioned;
INSERT INTO gateway_requests SELECT * FROM gateway_requests_unpartitioned;
DROP TABLE gateway_requests_unpartitioned;
ALTER TABLE gateway_requests ADD PRIMARY KEY (id, created_at);
ALTER TABLE gateway_requests ADD FOREIGN KEY (organization_id) REFERENCES organizations (id);
ALTER TABLE gateway_requests ADD FOREIGN KEY (location_id) REFERENCES locations (id);
ALTER TABLE gateway_requests ADD FOREIGN KEY (gateway_id) REFERENCES gateways (id);
CREATE INDEX gateway_requests_org ON gateway_requests (organization_id, created_at DESC);
CREATE INDEX gateway_requests_open ON gateway_requests (created_at) WHERE completed_at IS NULL;

CREATE INDEX gateway_request_ids_created ON gateway_request_ids (created_at);
ALTER TABLE gateway_idempotency_keys ADD FOREIGN KEY (request_id) REFERENCES gateway_request_ids (id)
    ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;

-- The id claim follows its request when the request's created_at is rewritten, which the
-- service never does but a backfill, an operator or a test may: a lookup by id must still find
-- the request's month. A column trigger: the service's own updates do not fire it.
-- +goose StatementBegin
CREATE FUNCTION gateway_request_ids_follow() RETURNS trigger
    LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE gateway_request_ids SET created_at = NEW.created_at WHERE id = NEW.id;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER gateway_request_ids_follow BEFORE UPDATE OF created_at ON gateway_requests
    FOR EACH ROW WHEN (OLD.created_at IS DISTINCT FROM NEW.created_at)
    EXECUTE FUNCTION gateway_request_ids_follow();

-- +goose Down
DROP TRIGGER gateway_request_ids_follow ON gateway_requests;
DROP FUNCTION gateway_request_ids_follow();
ALTER TABLE gateway_idempotency_keys DROP CONSTRAINT gateway_idempotency_keys_request_id_fkey;
ALTER TABLE gateway_requests RENAME TO gateway_requests_partitioned;
CREATE TABLE gateway_requests (LIKE gateway_requests_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
INSERT INTO gateway_requests SELECT * FROM gateway_requests_partitioned;
DROP TABLE gateway_requests_partitioned;
ALTER TABLE gateway_requests ADD PRIMARY KEY (id);
ALTER TABLE gateway_requests ADD FOREIGN KEY (organization_id) REFERENCES organizations (id);
ALTER TABLE gateway_requests ADD FOREIGN KEY (location_id) REFERENCES locations (id);
ALTER TABLE gateway_requests ADD FOREIGN KEY (gateway_id) REFERENCES gateways (id);
CREATE INDEX gateway_requests_org ON gateway_requests (organization_id, created_at DESC);
CREATE INDEX gateway_requests_open ON gateway_requests (created_at) WHERE completed_at IS NULL;
-- A key whose request was dropped with its month goes with it (as ON DELETE CASCADE would).
DELETE FROM gateway_idempotency_keys i WHERE NOT EXISTS (SELECT 1 FROM gateway_requests r WHERE r.id = i.request_id);
ALTER TABLE gateway_idempotency_keys ADD FOREIGN KEY (request_id) REFERENCES gateway_requests (id)
    ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;
DROP TABLE gateway_request_ids;
