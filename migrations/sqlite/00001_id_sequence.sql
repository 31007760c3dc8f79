-- +goose Up
CREATE TABLE IF NOT EXISTS id_sequence (
    biz_tag     VARCHAR(64)  NOT NULL PRIMARY KEY,
    max_id      BIGINT       NOT NULL DEFAULT 1,
    step        INTEGER      NOT NULL CHECK (step > 0),
    description VARCHAR(256) NOT NULL DEFAULT '',
    updated_at  TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- +goose Down
DROP TABLE id_sequence;
