-- +goose Up
-- A gateway's alert log has an identity (GET /alerts's stream): a gateway started on a new
-- database (replaced, or its file lost) begins a new log whose seqs start again at 1. The
-- cursor keeps the stream it follows; an alert is one per (gateway, stream, seq). Rows of
-- gateways before streams keep '' (the first stream seen is adopted as the same log).
ALTER TABLE gateway_alert_cursors ADD COLUMN stream text NOT NULL DEFAULT '';
ALTER TABLE gateway_alerts ADD COLUMN stream text NOT NULL DEFAULT '';
ALTER TABLE gateway_alerts DROP CONSTRAINT gateway_alerts_pkey, ADD PRIMARY KEY (gateway_id, stream, seq);

-- +goose Down
ALTER TABLE gateway_alerts DROP CONSTRAINT gateway_alerts_pkey, ADD PRIMARY KEY (gateway_id, seq);
ALTER TABLE gateway_alerts DROP COLUMN stream;
ALTER TABLE gateway_alert_cursors DROP COLUMN stream;
