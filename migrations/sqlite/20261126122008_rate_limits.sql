-- Rate-limit token buckets shared by every instance (PostgreSQL). On SQLite the buckets live in the one
-- serving process and this table stays empty; it exists so that both schemas match.
create table rate_limit_buckets (
    environment_id text not null,
    category text not null,
    tokens real not null,
    granted real not null,
    updated_at bigint not null,
    primary key (environment_id, category)
);
