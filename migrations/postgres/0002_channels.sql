-- Contexts (e.g. a tenant) that channel connections and endpoints can be tied to.
create table contexts (
    environment_id text not null,
    context_type text not null,
    context_id text not null,
    data jsonb,
    created_at bigint not null,
    updated_at bigint not null,
    primary key (environment_id, context_type, context_id)
);

-- Channel connections: the credential linking a subscriber or a shared context to a chat integration.
create table channel_connections (
    id text primary key,
    environment_id text not null,
    organization_id text not null,
    identifier text not null,
    integration_identifier text not null,
    provider_id text not null,
    channel text not null,
    connection_mode text not null,
    subscriber_id text,
    -- '' for shared connections: part of the one-per-resource key below.
    subscriber_key text not null,
    context_keys jsonb not null,
    -- Sorted context keys joined by a newline ('' when none): exact-set match is equality.
    context_set text not null,
    workspace jsonb not null,
    auth_sealed text not null,
    created_at bigint not null,
    updated_at bigint not null
);
create unique index channel_connections_identifier on channel_connections (environment_id, identifier);
-- One connection per resource and integration.
create unique index channel_connections_resource
    on channel_connections (environment_id, integration_identifier, subscriber_key, context_set);
create index channel_connections_created on channel_connections (environment_id, created_at, id);
create index channel_connections_updated on channel_connections (environment_id, updated_at, id);
create index channel_connections_subscriber on channel_connections (environment_id, subscriber_id, created_at, id);
create index channel_connections_context on channel_connections (environment_id, context_set, created_at, id);

-- Channel endpoints: concrete destinations (a Slack channel, a phone number, a webhook URL, …).
create table channel_endpoints (
    id text primary key,
    environment_id text not null,
    organization_id text not null,
    identifier text not null,
    endpoint_type text not null,
    endpoint jsonb not null,
    integration_identifier text not null,
    provider_id text not null,
    channel text not null,
    connection_identifier text,
    subscriber_id text,
    context_keys jsonb not null,
    context_set text not null,
    created_at bigint not null,
    updated_at bigint not null
);
create unique index channel_endpoints_identifier on channel_endpoints (environment_id, identifier);
-- Every filter of the list has an index leading with it, in both orders.
create index channel_endpoints_created on channel_endpoints (environment_id, created_at, id);
create index channel_endpoints_updated on channel_endpoints (environment_id, updated_at, id);
create index channel_endpoints_subscriber on channel_endpoints (environment_id, subscriber_id, created_at, id);
create index channel_endpoints_subscriber_u on channel_endpoints (environment_id, subscriber_id, updated_at, id);
create index channel_endpoints_context on channel_endpoints (environment_id, context_set, created_at, id);
create index channel_endpoints_context_u on channel_endpoints (environment_id, context_set, updated_at, id);
create index channel_endpoints_channel on channel_endpoints (environment_id, channel, created_at, id);
create index channel_endpoints_provider on channel_endpoints (environment_id, provider_id, created_at, id);
create index channel_endpoints_integration on channel_endpoints (environment_id, integration_identifier, created_at, id);
create index channel_endpoints_connection on channel_endpoints (environment_id, connection_identifier, created_at, id);
