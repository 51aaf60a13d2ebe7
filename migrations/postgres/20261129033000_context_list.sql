-- The contexts API (issue 38) lists an environment's contexts by cursor: `id` is the context's key `type:id`,
-- unique in its environment, the list's cursor and what `search` matches; derived from the two parts, so the
-- writes that exist (a trigger's, a channel connection's) keep writing only those. An index per order.
alter table contexts add column id text generated always as (context_type || ':' || context_id) stored;
create index contexts_key on contexts (environment_id, id);
create index contexts_created on contexts (environment_id, created_at, id);
create index contexts_updated on contexts (environment_id, updated_at, id);
