-- When a process holding one of the subscriber's sockets last said it still holds it (Unix ms). A subscriber
-- online whose heartbeat is older than the bound was left so by a process that stopped without saying (a
-- crash): the sweep (api::socket) records it offline, finding it through the partial index.
alter table subscribers add column online_heartbeat bigint;
update subscribers set online_heartbeat = coalesce(last_online_at, 0) where is_online = true;
create index subscribers_online on subscribers (online_heartbeat) where is_online = true;
