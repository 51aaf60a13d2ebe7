-- Subscriber preferences: one row per (subscriber, level). `workflow_ref` is the workflow's `_id`, or '' for
-- the subscriber's global preference (a key column cannot be NULL). A NULL flag means "not chosen at this
-- level": the level before it decides (src/domain/preference.rs).
create table subscriber_preferences (
    environment_id text not null,
    subscriber_ref text not null,
    workflow_ref text not null,
    enabled boolean,
    in_app boolean,
    email boolean,
    sms boolean,
    chat boolean,
    push boolean,
    created_at bigint not null,
    updated_at bigint not null,
    primary key (environment_id, subscriber_ref, workflow_ref)
);
