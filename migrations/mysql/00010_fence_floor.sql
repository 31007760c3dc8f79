-- +goose Up
-- Two columns of the fence record (package fence, migration 00005) for
-- what a failover or a restore may lose besides reservations:
--   tag_floor: the sum of every fence's margin (fence.Record.Floor). A
--     fence adds its margin to it as it moves every tag's max_id up, and
--     a tag created afterwards starts tag_floor above the start it asks
--     for, read in the creation's own transaction under a share lock of
--     this row. So every tag's max_id is at least its start plus
--     tag_floor, and a tag whose creation a failover lost, made again
--     from its start, starts above every ID handed out from the lost row.
--   covers: the newest fence generation the writer of the row knew of
--     (fence.Record.Covers). A process that saw a generation this row
--     does not cover knows the row lost that fence, and fences again.
-- 0 in both, as here for a store fenced before this migration, means
-- "none": no floor, and nothing known about what the row covers.
ALTER TABLE idgen_fence ADD COLUMN tag_floor BIGINT NOT NULL DEFAULT 0;
ALTER TABLE idgen_fence ADD COLUMN covers BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE idgen_fence DROP COLUMN covers;
ALTER TABLE idgen_fence DROP COLUMN tag_floor;
