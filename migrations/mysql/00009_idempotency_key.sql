-- +goose Up
-- One row per idempotency key of a caller (package idempotency): a
-- placeholder while status is 0, then the answer to replay. scope is a
-- SHA-256 digest of the caller's token (never the token) or
-- 'anonymous'. Times are Unix milliseconds. Expired rows are swept in
-- batches by expires_at. Keys are compared byte for byte (ascii_bin):
-- "abc" and "ABC" are two keys. MEDIUMBLOB holds the largest batch.
CREATE TABLE idempotency_key (
    scope        VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    idem_key     VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    fingerprint  VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    owner        VARCHAR(32)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    status       INT          NOT NULL DEFAULT 0,
    content_type VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    body         MEDIUMBLOB   NOT NULL,
    locked_until BIGINT       NOT NULL,
    expires_at   BIGINT       NOT NULL,
    PRIMARY KEY (scope, idem_key),
    KEY idempotency_key_expires (expires_at)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE idempotency_key;
