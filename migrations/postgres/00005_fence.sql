-- +goose Up
-- idgen_fence records the identity of the database history the store's
-- rows belong to (package fence): a reservation, a worker-ID claim or a
-- renewal reads it in its own transaction beside the server's identity,
-- and the first process that finds them different (an asynchronous
-- failover, a restore) fences the store once and records the new one.
-- One row, id 1. Times are Unix milliseconds, like worker_node's.
--   backend, system_id, timeline, log_position: the identity recorded
--     (here pg_control_system().system_identifier, the WAL timeline, and
--     the WAL LSN at the time);
--   generation: changes with every write, never goes down;
--   fence_until: worker IDs claimed before it start their IDs at it;
--   fences, fenced_at: how many fences, and the last one's time.
CREATE TABLE IF NOT EXISTS idgen_fence (
    id           INTEGER      NOT NULL PRIMARY KEY CHECK (id = 1),
    backend      VARCHAR(16)  NOT NULL DEFAULT '',
    system_id    VARCHAR(128) NOT NULL DEFAULT '',
    timeline     VARCHAR(64)  NOT NULL DEFAULT '',
    log_position TEXT         NOT NULL DEFAULT '',
    generation   BIGINT       NOT NULL DEFAULT 0,
    fence_until  BIGINT       NOT NULL DEFAULT 0,
    fences       BIGINT       NOT NULL DEFAULT 0,
    fenced_at    BIGINT       NOT NULL DEFAULT 0,
    recorded_at  TIMESTAMPTZ  NOT NULL DEFAULT now()
);
INSERT INTO idgen_fence (id) VALUES (1) ON CONFLICT (id) DO NOTHING;

-- +goose Down
DROP TABLE idgen_fence;
