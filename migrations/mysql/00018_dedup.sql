-- +goose Up
-- Consumer dedup (package idempotency/dedup): one row per message a
-- consumer group processed, inserted by dedup.Deduper.Do in the
-- consumer's own transaction, beside its business write, so that both
-- commit or neither does. A redelivery's insert finds the row and its
-- handler is skipped; one that arrives while the first transaction is
-- open waits on the primary key. expires_at (Unix milliseconds) is when
-- the sweep may delete the row: the retention must outlast the broker's
-- redeliveries. Groups and keys are bytes (VARBINARY): no collation
-- folds case or trailing spaces, so two keys are one only if equal.
CREATE TABLE IF NOT EXISTS idgen_dedup (
    dedup_group VARBINARY(100) NOT NULL,
    message_key VARBINARY(255) NOT NULL,
    expires_at  BIGINT         NOT NULL,
    PRIMARY KEY (dedup_group, message_key),
    KEY idgen_dedup_expires (expires_at)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE idgen_dedup;
