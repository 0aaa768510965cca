-- +goose Up

-- A request whose first send an apiserver makes itself, in the handler's own process (the
-- gateway cloud API's fast path, docs/decisions/0009-first-send-in-line.md): the apiserver
-- owns it until lease_until and keeps pushing that forward while the call is in flight. A
-- request still open after its lease lapsed lost its owner (the apiserver stopped): the
-- reconciler, or any poll that finds it so, starts its workflow, which takes it over under
-- the crash rules of DESIGN §6.2 (a hardware call whose fate is unknown is never re-sent).
-- NULL for every other request, and once the workflow owns it.
ALTER TABLE gateway_requests ADD COLUMN lease_until timestamptz;

CREATE INDEX gateway_requests_leased ON gateway_requests (lease_until)
    WHERE lease_until IS NOT NULL AND completed_at IS NULL;

-- +goose Down
DROP INDEX gateway_requests_leased;
ALTER TABLE gateway_requests DROP COLUMN lease_until;
