-- +goose Up
-- idgen_mark keeps, per sequence table and tag, the end of the last
-- range a reservation took (or what a hand-back set the row back to),
-- written in the reservation's own transaction. A tag's row found below
-- its mark is a row that went back while this table did not: the
-- sequence table restored alone, or a row rewritten by hand. Every
-- instance reads the mark in its reservation's locking statement, so
-- the first reservation after such a loss fences the store, whichever
-- instance makes it (package fence), and the fence raises every row to
-- its mark. A creation of a tag whose row is gone but whose mark is not
-- starts at the mark. The name of the sequence table is a column, so
-- that Leaf's table is covered as idgen's own.
CREATE TABLE IF NOT EXISTS idgen_mark (
    seq_table VARCHAR(32)  NOT NULL,
    biz_tag   VARCHAR(128) NOT NULL,
    max_id    BIGINT       NOT NULL,
    PRIMARY KEY (seq_table, biz_tag)
);

-- +goose Down
DROP TABLE idgen_mark;
