-- +goose Up

-- Rate limits of the tower API (per service-provider client), the app engine API (per key)
-- and the token endpoint (per client id), DESIGN §8: GCRA like the gateway cloud's
-- (gateway_rate_limits), one timestamp per bucket, shared by every apiserver. UNLOGGED: no
-- request waits for a WAL flush to count; a crash may forget some counts, which is harmless.
CREATE UNLOGGED TABLE rate_limits (
    bucket           text PRIMARY KEY,
    tat              timestamptz NOT NULL,
    limit_per_minute integer NOT NULL,
    allowed          boolean NOT NULL,
    seen_at          timestamptz NOT NULL
);

-- Overrides of the defaults (requests per minute); NULL keeps the setting's default.
ALTER TABLE api_clients ADD COLUMN rate_limit integer CHECK (rate_limit BETWEEN 1 AND 1000000);
ALTER TABLE api_clients ADD COLUMN token_rate_limit integer CHECK (token_rate_limit BETWEEN 1 AND 1000000);
ALTER TABLE app_api_keys ADD COLUMN rate_limit integer CHECK (rate_limit BETWEEN 1 AND 1000000);

-- +goose Down
ALTER TABLE app_api_keys DROP COLUMN rate_limit;
ALTER TABLE api_clients DROP COLUMN token_rate_limit;
ALTER TABLE api_clients DROP COLUMN rate_limit;
DROP TABLE rate_limits;
