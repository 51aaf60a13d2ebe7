-- Topics and their subscriptions (issue 23). A subscription row is what a fan-out reads: it carries the
-- topic's key and the subscriber's subscriberId so a batch needs no join.
create table topics (
    id text primary key,                 -- ObjectId
    organization_id text not null,
    environment_id text not null,
    key text not null,
    name text,
    created_at bigint not null,
    updated_at bigint not null,
    unique (environment_id, key)
);
-- One subscription per (topic, subscriber). `id` is an ObjectId (time-ordered): a fan-out reads a topic's
-- subscriptions in `id` order from a cursor.
create table topic_subscriptions (
    id text primary key,
    organization_id text not null,
    environment_id text not null,
    topic_id text not null,
    topic_key text not null,
    subscriber_ref text not null,        -- the subscriber's _id
    subscriber_id text not null,         -- its subscriberId
    identifier text not null,            -- the subscription's identifier (default tk_<topicKey>:si_<subscriberId>)
    created_at bigint not null,
    updated_at bigint not null,
    unique (topic_id, subscriber_id),
    unique (topic_id, identifier)
);
create index topic_subscriptions_fanout on topic_subscriptions (topic_id, id);
create index topic_subscriptions_subscriber on topic_subscriptions (environment_id, subscriber_ref);
