-- +goose Up
-- opaque_fingerprint moves a tag's opaque flag onto its id_sequence row
-- (see 00008): '' for a plain tag, else the fingerprint of the key the
-- tag was created under. Written with the row, in the same INSERT, it
-- cannot be lost apart from the counter: a dump or a restore of
-- id_sequence alone keeps it. tag_opaque stays and is still written, for
-- instances not yet upgraded and for a down migration; its rows are
-- copied here once.
ALTER TABLE id_sequence ADD COLUMN opaque_fingerprint VARCHAR(64) NOT NULL DEFAULT '';
UPDATE id_sequence SET opaque_fingerprint =
    (SELECT o.key_fingerprint FROM tag_opaque o WHERE o.biz_tag = id_sequence.biz_tag)
    WHERE biz_tag IN (SELECT biz_tag FROM tag_opaque);

-- +goose Down
ALTER TABLE id_sequence DROP COLUMN opaque_fingerprint;
