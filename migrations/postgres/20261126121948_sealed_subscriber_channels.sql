-- A subscriber's channels (per-provider credentials: webhook URLs, device tokens) are stored sealed by the
-- application (AES-256-GCM, base64), so the column becomes text like SQLite's. Rows stored in clear keep
-- their JSON text until start-up seals them (Store::seal_subscriber_channels).
alter table subscribers alter column channels drop default;
alter table subscribers alter column channels type text using channels::text;
alter table subscribers alter column channels set default '[]';
