-- +goose Up

-- What a gateway request concerns, recorded when it is made: the access code of an
-- access-code hold, open or release (the code's id is its hold's transaction id), the
-- gateway locker of an access-code close. What follows from a request's outcome reads it
-- here instead of taking paths and bodies apart. Empty (NULL) for the cloud API's requests.
ALTER TABLE gateway_requests ADD COLUMN subject text;

-- Requests made before: the subject their path (or, for a hold, body) carried.
UPDATE gateway_requests SET subject = split_part(gateway_path, '/', 3)
WHERE kind IN ('access-code-open', 'access-code-release', 'access-code-close');
UPDATE gateway_requests SET subject = convert_from(request_body, 'UTF8')::jsonb ->> 'transactionId'
WHERE kind = 'access-code-hold' AND request_body IS NOT NULL;

-- +goose Down
ALTER TABLE gateway_requests DROP COLUMN subject;
