-- Real deliveries: a job's retry/failover state, and what a channel message was sent to and how it went.
alter table jobs add column delivery text;
alter table messages add column email text;
alter table messages add column phone text;
alter table messages add column direct_webhook_url text;
alter table messages add column device_tokens text;
alter table messages add column delivered_at bigint;
alter table messages add column error_id text;
alter table messages add column error_text text;
