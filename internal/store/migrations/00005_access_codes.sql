-- +goose Up

-- An active access code holds its locker through a gateway transaction whose id is the
-- code's id; a gateway locker holds one transaction at a time, so one active code per locker.
CREATE UNIQUE INDEX access_codes_one_per_locker ON access_codes (gateway_id, locker_id) WHERE status = 'active';
CREATE INDEX access_codes_active_expiry ON access_codes (expires_at) WHERE status = 'active';
-- The last two digits, for the masked form lists and transaction rows show.
ALTER TABLE access_codes ADD COLUMN code_last2 text NOT NULL DEFAULT '';

-- Rows written for a gateway request (an access-code open or close, a transaction created
-- through the cloud API) name it, so writing them again after a retry changes nothing.
ALTER TABLE transactions ADD COLUMN request_id uuid;
CREATE UNIQUE INDEX transactions_request ON transactions (request_id) WHERE request_id IS NOT NULL;

-- +goose Down
DROP INDEX transactions_request;
ALTER TABLE transactions DROP COLUMN request_id;
ALTER TABLE access_codes DROP COLUMN code_last2;
DROP INDEX access_codes_active_expiry;
DROP INDEX access_codes_one_per_locker;
