-- +goose Up
-- range_cap: the largest range the lease's owner reserves in one
-- reservation (the larger of its --max-step and --max-range), written at
-- every claim. A fence sizes the margin it adds for instances the store
-- lost track of from the largest cap among the leases it counts and the
-- largest row step, not from its own flags alone: an instance with a
-- larger cap than the fencer's is covered too (package fence, NewPlan).
-- 0, as for every lease before this migration, is no cap recorded: the
-- fencer's own counts.
ALTER TABLE worker_node ADD COLUMN range_cap BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE worker_node DROP COLUMN range_cap;
