-- +goose Up
-- pinned marks a worker ID that a process holds as its static worker ID
-- (serve --worker-id): leased claims never take it, even after its lease
-- expired, so a static instance that restarts finds its ID free. Set it
-- back to 0 by hand to return a worker ID that is no longer used to the
-- leased pool.
ALTER TABLE worker_node ADD COLUMN pinned INT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE worker_node DROP COLUMN pinned;
