-- +goose Up
-- tag_opaque marks the tags whose IDs are opaque (package opaque): every
-- instance hands out a keyed permutation of the tag's counter instead of
-- the counter. key_fingerprint names the key the tag was created under
-- (opaque.Key.Fingerprint, never the key): an instance holding another key
-- refuses the tag, since two keys over one counter could collide. A row
-- is written with its tag and never changed: a tag is opaque, or not, for
-- its whole life. The table stands beside the sequence table rather than
-- adding a column to it, so that it works the same beside Leaf's table.
CREATE TABLE IF NOT EXISTS tag_opaque (
    biz_tag         VARCHAR(64) NOT NULL PRIMARY KEY,
    key_fingerprint VARCHAR(64)  NOT NULL,
    created_at      TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- +goose Down
DROP TABLE tag_opaque;
