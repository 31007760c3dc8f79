-- +goose Up
-- One row per idempotency key of a caller (package idempotency): a
-- placeholder while status is 0, then the answer to replay. scope is a
-- SHA-256 digest of the caller's token (never the token) or
-- 'anonymous'. Times are Unix milliseconds. Expired rows are swept in
-- batches by expires_at.
CREATE TABLE idempotency_key (
    scope        VARCHAR(64)  NOT NULL,
    idem_key     VARCHAR(255) NOT NULL,
    fingerprint  VARCHAR(64)  NOT NULL,
    owner        VARCHAR(32)  NOT NULL,
    status       INT          NOT NULL DEFAULT 0,
    content_type VARCHAR(64)  NOT NULL DEFAULT '',
    body         BYTEA        NOT NULL DEFAULT '',
    locked_until BIGINT       NOT NULL,
    expires_at   BIGINT       NOT NULL,
    PRIMARY KEY (scope, idem_key)
);
CREATE INDEX idempotency_key_expires ON idempotency_key (expires_at);

-- +goose Down
DROP TABLE idempotency_key;
