-- The Inbox of a session opened with a context shows the subscriber's in-app messages whose context keys equal
-- the session's exactly (none for a session without one): one range of this index per subscriber and context,
-- newest first. `context_keys` is the sorted array, so an exact set is an equality.
create index messages_inbox on messages (environment_id, subscriber_ref, context_keys, deleted, created_at, id);
