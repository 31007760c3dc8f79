-- +goose Up
-- snowflake_layout records the layouts, epoch and bit widths, that the
-- worker IDs of a lease table (worker_node) issue IDs in, so that no
-- process with another layout or epoch can reissue their IDs: the first
-- claim records its layout, and every later claim is checked against the
-- records in the same transaction (snowflake.AdmitLayout). One row per
-- layout, with ordinals from 0 in the order they were recorded; every
-- claim and relayout locks the row of ordinal 0 first. worker_from to
-- worker_to - 1 spans the worker IDs claimed in the layout (0 and 0: none
-- yet). not_before is the floor `idgen snowflake relayout` set for the
-- layout's IDs, and retired_at the time it retired the layout, at or after
-- every ID issued in it. Times are Unix milliseconds, 0 for none.
CREATE TABLE IF NOT EXISTS snowflake_layout (
    lease_table   VARCHAR(64) NOT NULL,
    ordinal       INT         NOT NULL,
    epoch_ms      BIGINT      NOT NULL,
    time_bits     INT         NOT NULL,
    worker_bits   INT         NOT NULL,
    sequence_bits INT         NOT NULL,
    worker_from   BIGINT      NOT NULL DEFAULT 0,
    worker_to     BIGINT      NOT NULL DEFAULT 0,
    not_before    BIGINT      NOT NULL DEFAULT 0,
    retired_at    BIGINT      NOT NULL DEFAULT 0,
    updated_at    DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (lease_table, ordinal)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE snowflake_layout;
