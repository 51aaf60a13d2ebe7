-- A subscriber's channels (per-provider credentials: webhook URLs, device tokens) are stored sealed by the
-- application (AES-256-GCM, base64). The column is text already on SQLite: nothing to change here (the
-- PostgreSQL twin turns its jsonb column into text). Rows stored in clear are sealed at start-up
-- (Store::seal_subscriber_channels).
select 1;
