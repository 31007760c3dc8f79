-- +goose Up
-- seen_generation: the generation of the idgen_fence record that the
-- owner's last claim or renewal of the lease was checked against. After
-- a fence, segment reservations are held until every lease the fence held
-- has been renewed or claimed against a record at least that new, or the
-- fence's hold (fence_until) has ended: an instance that saw a fence the
-- store has since lost fences again at its next renewal, adding what the
-- lost fence had added, before anyone reserves onto ranges reserved after
-- it (package fence, Holding). 0, as for every lease before this
-- migration, is older than any record.
ALTER TABLE worker_node ADD COLUMN seen_generation BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE worker_node DROP COLUMN seen_generation;
