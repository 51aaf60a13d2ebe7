-- Organizations, environments and API keys.
create table organizations (
    id text primary key,
    name text not null,
    created_at bigint not null
);

create table environments (
    id text primary key,
    organization_id text not null references organizations (id),
    name text not null,
    created_at bigint not null,
    updated_at bigint not null,
    unique (organization_id, name)
);

create table api_keys (
    id text primary key,
    environment_id text not null references environments (id),
    organization_id text not null references organizations (id),
    key_hash text not null unique,
    key_encrypted text not null,
    created_at bigint not null
);
create index api_keys_environment on api_keys (environment_id, created_at);

-- Idempotency records, kept 24 h (design.md §3).
create table idempotency_keys (
    environment_id text not null,
    idem_key text not null,
    request_hash text not null,
    state text not null,            -- 'in_progress' | 'done'
    status integer,
    content_type text,
    body bytea,
    created_at bigint not null,
    expires_at bigint not null,
    primary key (environment_id, idem_key)
);
create index idempotency_keys_expiry on idempotency_keys (expires_at);

-- Subscribers.
create table subscribers (
    id text primary key,
    environment_id text not null,
    organization_id text not null,
    subscriber_id text not null,
    first_name text,
    last_name text,
    full_name text not null default '',
    email text,
    phone text,
    avatar text,
    locale text,
    timezone text,
    data jsonb,
    channels jsonb not null default '[]',
    is_online boolean,
    last_online_at bigint,
    deleted boolean not null default false,
    version bigint not null default 0,
    created_at bigint not null,
    updated_at bigint not null
);
create unique index subscribers_identifier on subscribers (environment_id, subscriber_id) where deleted = false;
create index subscribers_env_id on subscribers (environment_id, deleted, id);
create index subscribers_env_created on subscribers (environment_id, deleted, created_at, id);
create index subscribers_env_updated on subscribers (environment_id, deleted, updated_at, id);

-- Case-sensitive substring search on email, phone and name: trigram GIN indexes (LIKE rechecks exactly).
create extension if not exists pg_trgm with schema public;
create index subscribers_email_trgm on subscribers using gin (email public.gin_trgm_ops);
create index subscribers_phone_trgm on subscribers using gin (phone public.gin_trgm_ops);
create index subscribers_name_trgm on subscribers using gin (full_name public.gin_trgm_ops);

-- Integrations. Credentials are AES-256-GCM ciphertext.
create table integrations (
    id text primary key,
    environment_id text not null,
    organization_id text not null,
    name text not null,
    identifier text not null,
    provider_id text not null,
    channel text,
    kind text not null,
    credentials text not null,
    configurations jsonb,
    conditions jsonb,
    active boolean not null,
    is_primary boolean not null default false,
    priority bigint not null default 0,
    deleted boolean not null default false,
    deleted_at bigint,
    deleted_by text,
    version bigint not null default 0,
    created_at bigint not null,
    updated_at bigint not null
);
create unique index integrations_identifier on integrations (environment_id, identifier) where deleted = false;
create index integrations_env_channel on integrations (environment_id, deleted, channel, created_at);
create index integrations_env_provider on integrations (environment_id, provider_id, deleted, active, created_at);
