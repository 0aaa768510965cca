-- +goose Up

-- Wrong credentials are limited apart from the requests a caller may make (DESIGN §8): per
-- (client id or API, source address), with a growing back-off, in the same UNLOGGED
-- rate_limits table and its one row per bucket. In a failure bucket, failures counts the
-- wrong credentials since the last quiet hour and tat is when the next attempt may come (the
-- end of the back-off); the index finds stale failure buckets to drop.
ALTER TABLE rate_limits ADD COLUMN failures integer NOT NULL DEFAULT 0;
CREATE INDEX rate_limits_failure_seen ON rate_limits (seen_at) WHERE failures > 0;

-- +goose Down
DROP INDEX rate_limits_failure_seen;
ALTER TABLE rate_limits DROP COLUMN failures;
