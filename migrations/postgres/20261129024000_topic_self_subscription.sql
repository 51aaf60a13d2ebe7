-- Inbox topic subscriptions are the operator's to offer (issue 36): a subscriber may subscribe itself, through
-- the Inbox, only to a topic the operator opened to it. Off by default, so existing topics stay closed.
alter table topics add column allow_self_subscription boolean not null default false;
