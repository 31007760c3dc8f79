-- +goose Up
-- The SQL lock backend (store.Store.Locks, package lock). idgen_lock
-- keeps one row per lock name: its holder (owner, '' when free), the
-- fencing token of its last grant, and when that grant was made and
-- lapses, in Unix milliseconds by the granting process's clock. A row
-- stays after a release, with its owner cleared, so that a name's token
-- only ever goes up; a fence raises every token by its margin, as it
-- raises every counter. idgen_lock_mark keeps, per name, the token of
-- the last grant, written in the grant's own transaction: a lock row
-- found below its mark went back while the mark did not (the lock table
-- restored alone), and the next grant starts above the mark.
-- idgen_lock_waiter queues the owners waiting for a lock, in arrival
-- order (arrived_at, strictly increasing per name), each with a short
-- expiry its waiter refreshes: a waiter whose row lapsed is skipped.
CREATE TABLE IF NOT EXISTS idgen_lock (
    name       VARCHAR(200) NOT NULL,
    owner      VARCHAR(200) NOT NULL DEFAULT '',
    token      BIGINT NOT NULL DEFAULT 0,
    granted_at BIGINT NOT NULL DEFAULT 0,
    expires_at BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (name)
);

CREATE TABLE IF NOT EXISTS idgen_lock_mark (
    name  VARCHAR(200) NOT NULL,
    token BIGINT NOT NULL,
    PRIMARY KEY (name)
);

CREATE TABLE IF NOT EXISTS idgen_lock_waiter (
    name       VARCHAR(200) NOT NULL,
    owner      VARCHAR(200) NOT NULL,
    arrived_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (name, owner)
);

-- +goose Down
DROP TABLE idgen_lock_waiter;
DROP TABLE idgen_lock_mark;
DROP TABLE idgen_lock;
