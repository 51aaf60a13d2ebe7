-- The Inbox's session rules per environment (issue 36). `inbox_hmac`: whether a session needs the subscriber's
-- HMAC (`subscriberHash`); null only for environments made before this version, until start-up decides it from
-- their in-app integration (store::tenants). `session_epoch`: signed into every session token; raising it ends
-- every session of the environment. The environment named Production requires the HMAC from now on, and its
-- sessions opened without one end.
alter table environments add column inbox_hmac boolean;
alter table environments add column session_epoch bigint not null default 0;
update environments set inbox_hmac = true, session_epoch = session_epoch + 1 where lower(name) = 'production';
