-- Issue 36: secrets that earlier versions kept in clear beside their sealed originals are sealed too: a
-- webhook channel endpoint's URL, what chat and push messages record of their destinations (a webhook URL,
-- device tokens), stored idempotent answers (they carry access tokens and channel credentials); a
-- notification's `to` keeps no channel credentials. A SQL migration cannot encrypt: this one lists the rows
-- written in clear, and start-up rewrites each of them and takes it off the list (Store::seal_clear_rows).
create table clear_secrets (
    table_name text not null,
    -- The row's id; for idempotency_keys `<environment_id>:<idem_key>`.
    row_key text not null,
    primary key (table_name, row_key)
);
insert into clear_secrets (table_name, row_key)
    select 'channel_endpoints', id from channel_endpoints where endpoint_type = 'webhook';
insert into clear_secrets (table_name, row_key)
    select 'messages', id from messages where direct_webhook_url is not null or device_tokens is not null;
insert into clear_secrets (table_name, row_key)
    select 'notifications', id from notifications where to_value::text like '%"channels"%';
insert into clear_secrets (table_name, row_key)
    select 'idempotency_keys', environment_id || ':' || idem_key from idempotency_keys where body is not null;
