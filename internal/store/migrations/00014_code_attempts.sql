-- +goose Up

-- Wrong-code attempts are claimed before a code is judged (one at a time per key and
-- location, under an advisory lock), so parallel guesses cannot all slip under the limit; an
-- attempt that turns out not to be a wrong guess is deleted by its id. end_user_id is the
-- caller's own name for the person typing the code: the per-person limit counts per end
-- user, a higher ceiling counts all of them.
ALTER TABLE access_code_failures ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY;
ALTER TABLE access_code_failures ADD COLUMN end_user_id text;

-- +goose Down
ALTER TABLE access_code_failures DROP COLUMN end_user_id;
ALTER TABLE access_code_failures DROP COLUMN id;
