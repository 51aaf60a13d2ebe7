-- At most one digest is open (its job queued, its window not yet closed) per digest key: subscriber, workflow,
-- step and digest key value. Events that arrive together used to open a window each. Windows opened twice
-- before this version keep running on their own; only the oldest of each key stays open to new events.
update jobs set digest_key = null
where digest_key is not null and status = 'queued' and exists (
    select 1 from jobs o
    where o.digest_key = jobs.digest_key and o.status = 'queued'
      and (o.run_at < jobs.run_at or (o.run_at = jobs.run_at and o.id < jobs.id))
);
create unique index jobs_open_digest on jobs (digest_key) where digest_key is not null and status = 'queued';

-- The runs a throttle let through, per throttle key (subscriber, workflow, step), to count those inside its
-- window. A run is recorded once (a job run again after a crash finds its own pass); rows older than the
-- window are deleted by the next run of the same key.
create table throttle_passes (
    throttle_key text not null,
    job_id text not null,
    passed_at bigint not null,
    primary key (throttle_key, job_id)
);
create index throttle_passes_recent on throttle_passes (throttle_key, passed_at);
