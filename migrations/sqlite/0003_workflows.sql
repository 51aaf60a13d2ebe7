-- Workflows: a trigger identifier and an ordered list of steps (stored as a JSON array).
create table workflows (
    id text primary key,
    environment_id text not null,
    organization_id text not null,
    workflow_id text not null,
    name text not null,
    description text,
    tags text not null,
    active boolean not null,
    critical boolean not null,
    severity text not null,
    preferences text,
    payload_schema text,
    validate_payload boolean not null,
    steps text not null,
    deleted boolean not null default false,
    version bigint not null default 0,
    created_at bigint not null,
    updated_at bigint not null
);
create unique index workflows_identifier on workflows (environment_id, workflow_id) where deleted = false;
create index workflows_created on workflows (environment_id, deleted, created_at, id);
create index workflows_updated on workflows (environment_id, deleted, updated_at, id);
