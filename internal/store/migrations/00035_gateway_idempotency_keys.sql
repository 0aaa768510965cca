-- +goose Up

-- Whether the gateway honours Idempotency-Key on its mutating operations (its answers say so:
-- X-Idempotency-Keys: honoured; the gateway sync records it). Only then may a gateway request
-- whose send's fate is unknown (a cloud process died mid-call) be sent again: the gateway
-- answers what the first send did instead of acting twice (DESIGN §6.2, §7).
ALTER TABLE gateways ADD COLUMN honours_idempotency_keys boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE gateways DROP COLUMN honours_idempotency_keys;
