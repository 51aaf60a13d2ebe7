-- Outbound webhooks (issue 39): the outbox. A change that emits an event writes, in its own transaction, the
-- event's signed body once (`webhook_events`, the same bytes on every attempt) and one small row per endpoint
-- that receives it (`webhook_messages`): the delivery's state (pending, sending under a lease, success,
-- failed), the attempts made and when the next is due — small, so that the updates of a claim or a finish
-- rewrite few pages. `id` is the message id (`msg_` + an ObjectId, the `webhook-id` header), one per event
-- and the same for each of its endpoints; the event's own id is `evt_` + the same ObjectId. Attempts are kept
-- for the Svix attempt lists.
create table webhook_events (
    id text primary key,
    environment_id text not null,
    body text not null,
    created_at integer not null
);
create index webhook_events_environment on webhook_events (environment_id, id);

create table webhook_messages (
    id text not null,
    endpoint_id text not null,
    environment_id text not null,
    event_type text not null,
    status text not null,
    attempts integer not null,
    next_at integer not null,
    locked_until integer,
    created_at integer not null,
    updated_at integer not null,
    primary key (id, endpoint_id)
);
-- The claim: due pending deliveries in order, and sending ones whose lease ran out (their process died).
create index webhook_messages_due on webhook_messages (next_at) where status = 'pending';
create index webhook_messages_sending on webhook_messages (locked_until) where status = 'sending';
-- An endpoint's messages, newest first; an environment's rows for its erasure.
create index webhook_messages_endpoint on webhook_messages (environment_id, endpoint_id, id);

create table webhook_attempts (
    id text primary key,
    msg_id text not null,
    endpoint_id text not null,
    environment_id text not null,
    url text not null,
    response text not null,
    response_status_code integer not null,
    response_duration_ms integer not null,
    status text not null,
    trigger_type text not null,
    created_at integer not null
);
create index webhook_attempts_endpoint on webhook_attempts (environment_id, endpoint_id, id);
create index webhook_attempts_msg on webhook_attempts (environment_id, msg_id, id);

-- Since when an endpoint has failed without a success in between (an endpoint failing for 5 days is
-- disabled); null while it succeeds.
alter table webhook_endpoints add column failing_since integer;
