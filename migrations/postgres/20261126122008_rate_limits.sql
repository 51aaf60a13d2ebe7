-- Rate-limit token buckets shared by every instance: one row per (environment, category). Instances take
-- tokens in chunks and spend them locally (src/api/ratelimit.rs); `granted` is what the last take got.
create table rate_limit_buckets (
    environment_id text not null,
    category text not null,
    tokens double precision not null,
    granted double precision not null,
    updated_at bigint not null,
    primary key (environment_id, category)
);
