-- +goose Up
CREATE TABLE IF NOT EXISTS id_sequence (
    biz_tag     VARCHAR(64)  NOT NULL PRIMARY KEY,
    max_id      BIGINT       NOT NULL DEFAULT 1,
    step        INT          NOT NULL,
    description VARCHAR(256) NOT NULL DEFAULT '',
    updated_at  TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    CONSTRAINT id_sequence_step_positive CHECK (step > 0)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE id_sequence;
