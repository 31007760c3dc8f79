-- +goose Up
-- idgen_fence records the identity of the database history the store's
-- rows belong to (package fence): a reservation, a worker-ID claim or a
-- renewal reads it in its own transaction, and the first process that
-- finds it changed fences the store once and records the new one. One
-- row, id 1. Times are Unix milliseconds, like worker_node's.
-- A SQLite file has no server to ask, so it carries its own identity:
--   store_id: random, made here once; a copy of the file keeps it;
--   ticks: moved up by every checked transaction, the file's position.
-- The store also keeps what it saw in a sidecar file beside the database
-- (PATH.fence), so that a file put back from an older copy is found even
-- by a process that starts after it (docs/deploy.md).
--   backend, system_id, timeline, log_position: the identity recorded;
--   generation: changes with every write, never goes down;
--   fence_until: worker IDs claimed before it start their IDs at it;
--   fences, fenced_at: how many fences, and the last one's time.
CREATE TABLE IF NOT EXISTS idgen_fence (
    id           INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    store_id     TEXT    NOT NULL DEFAULT (lower(hex(randomblob(16)))),
    ticks        INTEGER NOT NULL DEFAULT 0,
    backend      TEXT    NOT NULL DEFAULT '',
    system_id    TEXT    NOT NULL DEFAULT '',
    timeline     TEXT    NOT NULL DEFAULT '',
    log_position TEXT    NOT NULL DEFAULT '',
    generation   INTEGER NOT NULL DEFAULT 0,
    fence_until  INTEGER NOT NULL DEFAULT 0,
    fences       INTEGER NOT NULL DEFAULT 0,
    fenced_at    INTEGER NOT NULL DEFAULT 0,
    recorded_at  TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP
);
INSERT INTO idgen_fence (id) VALUES (1) ON CONFLICT (id) DO NOTHING;

-- +goose Down
DROP TABLE idgen_fence;
