-- +goose Up
-- idgen_lock.waiting is 1 while idgen_lock_waiter may hold rows for the
-- lock: set in the transaction that queues a waiter, cleared by a grant
-- that leaves no live waiter behind, both under the lock row's lock. A
-- grant of a lock no one waits for reads the flag with the row and skips
-- the waiters' read; a release sends a wake-up only when it is set.
ALTER TABLE idgen_lock ADD COLUMN waiting INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE idgen_lock DROP COLUMN waiting;
