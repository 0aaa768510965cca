-- +goose Up

-- Every gateway request is sent by its workflow (docs/decisions/0012-every-gateway-request-a-workflow.md,
-- superseding 0009): no apiserver makes a first send under a lease any more. A request still
-- open under a lease when this runs was stored by an apiserver of the earlier build: the
-- reconciler starts its workflow (it lists every open request never started), which finds
-- its first send begun with unknown fate and follows DESIGN §6.2's crash rules.
DROP INDEX IF EXISTS gateway_requests_leased;
ALTER TABLE gateway_requests DROP COLUMN lease_until;

-- +goose Down
ALTER TABLE gateway_requests ADD COLUMN lease_until timestamptz;
CREATE INDEX gateway_requests_leased ON gateway_requests (lease_until)
    WHERE lease_until IS NOT NULL AND completed_at IS NULL;
