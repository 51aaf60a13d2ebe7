-- The messages whose Inbox snooze is running, found by the sweep that ends snoozes (api::socket).
create index messages_snoozed on messages (snoozed_until) where snoozed_until is not null;
