-- Topic fan-out (issue 23). A notification reached through a topic names it and the subscription that
-- reached it: the activity feed shows `topics` and filters by `topicKey` and `subscriptionId` through the
-- partial indexes (direct notifications, most of them, stay out of both).
alter table notifications add column topic_id text;
alter table notifications add column topic_key text;
alter table notifications add column subscription_identifier text;
create index notifications_topic on notifications (environment_id, topic_key, created_at)
    where topic_key is not null;
create index notifications_subscription on notifications (environment_id, subscription_identifier, created_at)
    where subscription_identifier is not null;

-- One row per trigger to topics or broadcast: what each recipient's notification is made of, the sources
-- in order, and how far the expansion got. Workers claim it with a lease as they claim jobs; each batch
-- advances `source_index`/`cursor` in the transaction that writes its notifications.
create table fanouts (
    id text primary key,
    organization_id text not null,
    environment_id text not null,
    transaction_id text not null,
    template text not null,
    sources text not null,
    skip text not null,
    source_index bigint not null default 0,
    cursor text not null default '',
    recipients bigint not null default 0,
    status text not null,
    locked_by text,
    locked_until bigint,
    created_at bigint not null,
    updated_at bigint not null
);
create index fanouts_running on fanouts (locked_until) where status = 'running';
create index fanouts_transaction on fanouts (environment_id, transaction_id);
