-- Issue 35: a subscriber's messages belong to its record (`_id`), not to its reusable subscriberId. The
-- feed, the counts, the marks, the Inbox and the socket select a subscriber's messages by `subscriber_ref`.
drop index messages_subscriber;
create index messages_subscriber on messages (environment_id, subscriber_ref, deleted, created_at, id);

-- Subscribers being erased: one row per deleted subscriber record, written by the delete, until workers have
-- erased its messages and stripped its notifications in bounded batches (src/engine/erasure.rs). Claimed
-- with a lease as jobs are, so a crash mid-erasure resumes elsewhere. `subscriber_id` is kept only while the
-- row lives: the notifications are found by it (`notifications_subscriber`).
create table subscriber_erasures (
    subscriber_ref text primary key,
    environment_id text not null,
    subscriber_id text not null,
    created_at bigint not null,
    locked_by text,
    locked_until bigint
);

-- Subscribers deleted by earlier builds were only marked deleted: they are erased too (their profile row
-- last).
insert into subscriber_erasures (subscriber_ref, environment_id, subscriber_id, created_at)
    select id, environment_id, subscriber_id, cast(strftime('%s', 'now') as integer) * 1000
    from subscribers where deleted = true;
