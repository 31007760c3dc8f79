-- +goose Up
-- The first migrations set no charset or collation, so the columns took
-- the server's default. On a latin1 server a description with an emoji
-- failed (Error 1366, a 500), and under any _ci collation tags compared
-- case-insensitively: ORDER and order were one row, unlike on PostgreSQL
-- and SQLite. utf8mb4 stores every character; utf8mb4_bin compares tags
-- byte for byte, as the other backends do. No existing row can clash:
-- a case-insensitive primary key held at most one of ORDER and order.
ALTER TABLE id_sequence
    MODIFY biz_tag     VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    MODIFY description VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;

-- +goose Down
-- Back to case-insensitive tags, in utf8mb4 so that no description is lost.
ALTER TABLE id_sequence
    MODIFY biz_tag     VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL,
    MODIFY description VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL DEFAULT '',
    DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
