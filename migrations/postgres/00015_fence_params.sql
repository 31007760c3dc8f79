-- +goose Up
-- The fleet's fence parameters, recorded by the first instance of a
-- fleet to start (store.Store.RecordFence): the margin (--fence-margin,
-- 0 for automatic) and the lease TTL in milliseconds (--lease-ttl; 0:
-- not recorded). Every fence uses them, whoever runs it: an instance, a
-- library program or a one-shot command such as `idgen tag bump`, whose
-- own flags are the defaults; and an instance started with other values
-- while others hold live leases is refused.
ALTER TABLE idgen_fence ADD COLUMN fence_margin BIGINT NOT NULL DEFAULT 0;
ALTER TABLE idgen_fence ADD COLUMN lease_ttl_ms BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE idgen_fence DROP COLUMN lease_ttl_ms;
ALTER TABLE idgen_fence DROP COLUMN fence_margin;
