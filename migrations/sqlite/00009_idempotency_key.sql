-- +goose Up
-- One row per idempotency key of a caller (package idempotency): a
-- placeholder while status is 0, then the answer to replay. scope is a
-- SHA-256 digest of the caller's token (never the token) or
-- 'anonymous'. Times are Unix milliseconds. Expired rows are swept in
-- batches by expires_at.
CREATE TABLE idempotency_key (
    scope        TEXT    NOT NULL,
    idem_key     TEXT    NOT NULL,
    fingerprint  TEXT    NOT NULL,
    owner        TEXT    NOT NULL,
    status       INTEGER NOT NULL DEFAULT 0,
    content_type TEXT    NOT NULL DEFAULT '',
    body         BLOB    NOT NULL DEFAULT x'',
    locked_until INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    PRIMARY KEY (scope, idem_key)
);
CREATE INDEX idempotency_key_expires ON idempotency_key (expires_at);

-- +goose Down
DROP TABLE idempotency_key;
