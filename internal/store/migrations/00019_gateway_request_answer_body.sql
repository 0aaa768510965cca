-- +goose Up

-- The body of the last answer a gateway-request workflow's send got, stored by the send
-- activity instead of being carried in the workflow's history (a body may be up to 1 MiB).
-- The outcome's store copies it to response_body and clears it; answer_send is the send
-- number it belongs to. NULL for a request settled by its apiserver's first send, and for
-- runs recorded before it (their bodies are in their histories).
ALTER TABLE gateway_requests ADD COLUMN answer_body bytea, ADD COLUMN answer_send integer;

-- +goose Down
ALTER TABLE gateway_requests DROP COLUMN answer_body, DROP COLUMN answer_send;
