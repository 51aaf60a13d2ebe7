-- What the Inbox shows and filters of an in-app message: its notification's tags and severity (copied at
-- creation, so lists filter without a join), when its subscriber first saw it and until when it is snoozed.
alter table messages add column tags text not null default '[]';
alter table messages add column severity text not null default 'none';
alter table messages add column first_seen_date bigint;
alter table messages add column snoozed_until bigint;
