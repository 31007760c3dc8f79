-- +goose Up
-- idgen_fence records the identity of the database history the store's
-- rows belong to (package fence): a reservation, a worker-ID claim or a
-- renewal reads it in its own transaction beside the server's identity,
-- and the first process that finds them different (an asynchronous
-- failover, a restore) fences the store once and records the new one.
-- One row, id 1. Times are Unix milliseconds, like worker_node's.
--   backend, system_id, timeline, log_position: the identity recorded
--     (MySQL: @@server_uuid and @@gtid_executed; MariaDB: @@server_id
--     and @@gtid_binlog_pos; Galera: wsrep_cluster_state_uuid and
--     wsrep_last_committed);
--   generation: changes with every write, never goes down;
--   fence_until: worker IDs claimed before it start their IDs at it;
--   fences, fenced_at: how many fences, and the last one's time.
-- log_position is TEXT (a GTID set can be long), so it has no DEFAULT
-- and the row is inserted with every column.
CREATE TABLE IF NOT EXISTS idgen_fence (
    id           INT          NOT NULL PRIMARY KEY,
    backend      VARCHAR(16)  NOT NULL DEFAULT '',
    system_id    VARCHAR(128) NOT NULL DEFAULT '',
    timeline     VARCHAR(64)  NOT NULL DEFAULT '',
    log_position TEXT         NOT NULL,
    generation   BIGINT       NOT NULL DEFAULT 0,
    fence_until  BIGINT       NOT NULL DEFAULT 0,
    fences       BIGINT       NOT NULL DEFAULT 0,
    fenced_at    BIGINT       NOT NULL DEFAULT 0,
    recorded_at  DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)
) ENGINE=InnoDB;
INSERT IGNORE INTO idgen_fence (id, log_position) VALUES (1, '');

-- +goose Down
DROP TABLE idgen_fence;
