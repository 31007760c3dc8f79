-- +goose Up
-- Three columns of the fence record (package fence, migration 00005) for
-- what a failover or a restore may lose besides reservations:
--   tag_floor: the sum of every fence's margin (fence.Record.Floor). A
--     fence adds its margin to it as it moves every tag's max_id up, and
--     a tag created afterwards starts tag_floor above the start it asks
--     for, read in the creation's own transaction. So every tag's max_id
--     is at least its start plus tag_floor, and a tag whose creation a
--     failover lost, made again from its start, starts above every ID
--     handed out from the lost row.
--   tag_creates: counts creations. A creation moves it up before it
--     reads tag_floor: the write locks this row until the creation
--     commits, so no fence commits between the read and the insert (a
--     fence locks the row first), and on Galera it puts the row in the
--     creation's write set, so that a creation and a fence on two nodes
--     conflict at certification instead of both committing.
--   covers: the newest fence generation the writer of the row knew of
--     (fence.Record.Covers). A process that saw a generation this row
--     does not cover knows the row lost that fence, and fences again.
-- 0 in tag_floor and covers, as here for a store fenced before this
-- migration, means none: no floor, and nothing known about what the row
-- covers.
ALTER TABLE idgen_fence ADD COLUMN tag_floor BIGINT NOT NULL DEFAULT 0;
ALTER TABLE idgen_fence ADD COLUMN covers BIGINT NOT NULL DEFAULT 0;
ALTER TABLE idgen_fence ADD COLUMN tag_creates BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE idgen_fence DROP COLUMN tag_creates;
ALTER TABLE idgen_fence DROP COLUMN covers;
ALTER TABLE idgen_fence DROP COLUMN tag_floor;
