-- +goose Up

-- A locker-open link's token opens a locker until it expires: keep it sealed with the master
-- key (AES-GCM, bound to the link's id), never in plaintext. Links made before this change lose
-- their stored copy; their creators already hold the token from the create answer.
ALTER TABLE locker_open_requests ADD COLUMN link_token_sealed bytea;
ALTER TABLE locker_open_requests ALTER COLUMN link_token DROP NOT NULL;
UPDATE locker_open_requests SET link_token = NULL;
ALTER TABLE locker_open_requests ADD CONSTRAINT locker_open_requests_no_plaintext CHECK (link_token IS NULL);

-- +goose Down
ALTER TABLE locker_open_requests DROP CONSTRAINT locker_open_requests_no_plaintext;
UPDATE locker_open_requests SET link_token = '' WHERE link_token IS NULL;
ALTER TABLE locker_open_requests ALTER COLUMN link_token SET NOT NULL;
ALTER TABLE locker_open_requests DROP COLUMN link_token_sealed;
