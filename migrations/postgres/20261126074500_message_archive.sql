-- Messages archived by their subscriber (the Inbox's archive).
alter table messages add column archived boolean not null default false;
alter table messages add column archived_at bigint;
