-- Outbound webhooks (issue 39): an environment's endpoints, as the official Svix clients manage them. `secrets`
-- holds the signing secrets sealed with the store's cipher (the current one and those rotated out that still
-- sign); `uid` is the caller's own unique name for an endpoint. Listed newest first by id (`ep_` + an
-- ObjectId, which sorts by creation).
create table webhook_endpoints (
    id text primary key,
    organization_id text not null,
    environment_id text not null,
    uid text,
    url text not null,
    description text not null,
    disabled boolean not null,
    event_types text,
    channels text,
    metadata text not null,
    throttle_rate integer,
    secrets text not null,
    version integer not null,
    created_at integer not null,
    updated_at integer not null
);
create unique index webhook_endpoints_uid on webhook_endpoints (environment_id, uid) where uid is not null;
create index webhook_endpoints_list on webhook_endpoints (environment_id, id);
