-- Workflow lists filter on status (a step with issues makes an active workflow ERROR) and sort by name.
alter table workflows add column has_issues boolean not null default false;
create index workflows_name on workflows (environment_id, deleted, lower(name), id);
