-- +goose Up
-- Consumer dedup (package idempotency/dedup): one row per message a
-- consumer group processed, inserted by dedup.Deduper.Do in the
-- consumer's own transaction, beside its business write, so that both
-- commit or neither does. A redelivery's insert finds the row and its
-- handler is skipped; one that arrives while the first transaction is
-- open waits on the primary key. expires_at (Unix milliseconds) is when
-- the sweep may delete the row: the retention must outlast the broker's
-- redeliveries.
CREATE TABLE IF NOT EXISTS idgen_dedup (
    dedup_group VARCHAR(100) NOT NULL,
    message_key VARCHAR(255) NOT NULL,
    expires_at  BIGINT       NOT NULL,
    PRIMARY KEY (dedup_group, message_key)
);
CREATE INDEX IF NOT EXISTS idgen_dedup_expires ON idgen_dedup (expires_at);

-- +goose Down
DROP TABLE idgen_dedup;
