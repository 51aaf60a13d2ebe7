-- Triggers seen, per environment: a repeated transactionId does not run again.
create table trigger_transactions (
    environment_id text not null,
    transaction_id text not null,
    created_at bigint not null,
    primary key (environment_id, transaction_id)
);

-- One record per (trigger, subscriber): the activity feed.
create table notifications (
    id text primary key,
    environment_id text not null,
    organization_id text not null,
    subscriber_ref text not null,
    subscriber_id text not null,
    workflow_ref text not null,
    workflow_identifier text not null,
    transaction_id text not null,
    channels text not null,
    -- ',in_app,email,': any-overlap filtering with portable LIKE.
    channel_set text not null,
    payload text not null,
    overrides text,
    to_value text,
    actor text,
    tags text not null,
    severity text not null,
    critical boolean not null,
    context_keys text not null,
    context_set text not null,
    digested_notification_id text,
    created_at bigint not null,
    updated_at bigint not null
);
create index notifications_created on notifications (environment_id, created_at, id);
create index notifications_transaction on notifications (environment_id, transaction_id);
create index notifications_subscriber on notifications (environment_id, subscriber_id, created_at);
create index notifications_workflow on notifications (environment_id, workflow_ref, created_at);
create index notifications_context on notifications (environment_id, context_set, created_at);

-- Jobs: one per (notification, step), claimed by workers with a lease.
create table jobs (
    id text primary key,
    environment_id text not null,
    organization_id text not null,
    notification_id text not null,
    subscriber_ref text not null,
    subscriber_id text not null,
    workflow_ref text not null,
    transaction_id text not null,
    step_index bigint not null,
    step text not null,
    step_type text not null,
    status text not null,
    provider_id text not null,
    payload text not null,
    overrides text,
    digest text,
    digest_key text,
    run_at bigint not null,
    locked_until bigint,
    locked_by text,
    attempts bigint not null default 0,
    dedupe_key text not null,
    schedule_extensions_count bigint not null default 0,
    created_at bigint not null,
    updated_at bigint not null
);
create unique index jobs_dedupe on jobs (dedupe_key);
create index jobs_due on jobs (status, run_at);
create index jobs_notification on jobs (notification_id, step_index);
create index jobs_transaction on jobs (environment_id, transaction_id, status);
create index jobs_digest on jobs (digest_key, status);

-- Execution details: every transition of every job.
create table execution_details (
    id text primary key,
    environment_id text not null,
    job_id text not null,
    notification_id text not null,
    status text not null,
    detail text not null,
    source text not null,
    is_retry boolean not null,
    is_test boolean not null,
    provider_id text,
    raw text,
    created_at bigint not null
);
create index execution_details_notification on execution_details (notification_id, created_at, id);

-- Messages (in-app inbox and the record of channel deliveries).
create table messages (
    id text primary key,
    environment_id text not null,
    organization_id text not null,
    notification_id text not null,
    subscriber_ref text not null,
    subscriber_id text not null,
    workflow_ref text not null,
    workflow_identifier text not null,
    job_id text not null,
    transaction_id text not null,
    channel text not null,
    subject text,
    content text not null,
    avatar text,
    cta text not null,
    data text,
    payload text not null,
    overrides text,
    read boolean not null default false,
    seen boolean not null default false,
    last_read_date bigint,
    last_seen_date bigint,
    status text not null,
    provider_id text not null,
    context_keys text not null,
    deleted boolean not null default false,
    created_at bigint not null,
    updated_at bigint not null
);
create unique index messages_job on messages (job_id);
create index messages_subscriber on messages (environment_id, subscriber_id, deleted, created_at, id);
create index messages_transaction on messages (environment_id, transaction_id);
create index messages_env_created on messages (environment_id, deleted, created_at, id);
