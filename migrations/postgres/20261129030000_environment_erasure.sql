-- Issue 38: environments created, changed and deleted through the API. `color` is what Novu's dashboard
-- shows an environment in (`#rrggbb`), kept as given.
alter table environments add column color text;

-- Environments being erased: one row per deleted environment, written by the delete (which removes the
-- environment and its API keys at once), until workers have deleted the environment's rows table by table in
-- bounded batches (src/engine/erasure.rs). Claimed with a lease as subscriber erasures are.
create table environment_erasures (
    environment_id text primary key,
    organization_id text not null,
    created_at bigint not null,
    locked_by text,
    locked_until bigint
);
