-- +goose Up
-- worker_node leases snowflake worker IDs to running instances (package
-- snowflake, LeaseStore). Times are Unix milliseconds in BIGINT columns,
-- taken from the instances' clocks, never the database's, and 0 means
-- none: the same in every dialect, and comparable with the millisecond
-- timestamps inside snowflake IDs. Rows are created by the first claims,
-- 64 at a time, lowest worker IDs first; a row whose owner is '' is free.
-- updated_at is the database's own time of the last change, for people
-- reading the table only.
CREATE TABLE IF NOT EXISTS worker_node (
    worker_id        INT          NOT NULL PRIMARY KEY,
    owner            VARCHAR(128) NOT NULL DEFAULT '',
    lease_expires_at BIGINT       NOT NULL DEFAULT 0,
    last_timestamp   BIGINT       NOT NULL DEFAULT 0,
    updated_at       TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    CONSTRAINT worker_node_worker_id_nonnegative CHECK (worker_id >= 0)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE worker_node;
