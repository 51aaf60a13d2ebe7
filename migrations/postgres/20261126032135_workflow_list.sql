-- Workflow lists filter on status (a step with issues makes an active workflow ERROR) and sort by name
-- (bytewise, as SQLite does, whatever the database's collation).
alter table workflows add column has_issues boolean not null default false;
create index workflows_name on workflows (environment_id, deleted, (lower(name) collate "C"), id);
