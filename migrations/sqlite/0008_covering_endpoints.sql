-- The endpoints of one subscriber or of one context set, newest first, are the list's main reads (and the
-- subscriber's ones are what every chat and SMS delivery resolves). Their indexes now carry every column,
-- so a 100-row page reads a few consecutive index pages instead of one table page per row: endpoints of a
-- context are created at different times and lie all over the table. The updatedAt-ordered and the other
-- filters' indexes stay narrow.
drop index channel_endpoints_subscriber;
create index channel_endpoints_subscriber on channel_endpoints (environment_id, subscriber_id, created_at, id,
    organization_id, identifier, endpoint_type, endpoint, integration_identifier, provider_id, channel,
    connection_identifier, context_keys, context_set, updated_at);
drop index channel_endpoints_context;
create index channel_endpoints_context on channel_endpoints (environment_id, context_set, created_at, id,
    organization_id, identifier, endpoint_type, endpoint, integration_identifier, provider_id, channel,
    connection_identifier, subscriber_id, context_keys, updated_at);
