-- The write path of a trigger. `status` leaves the key of the jobs-by-transaction index: every claim and
-- completion changed the status and so moved the job's entry to another place of the index, a page
-- written twice more per job. Cancelling (the index's reader) filters the few jobs of one transaction by
-- status just as well.
drop index jobs_transaction;
create index jobs_transaction on jobs (environment_id, transaction_id);

-- The due-jobs index holds only the jobs a worker may claim (queued, or running under a lease that may
-- expire). Completed and failed jobs left it: each completion wrote an entry that no claim ever reads, and
-- the index grew with the whole history instead of staying the size of the backlog.
drop index jobs_due;
create index jobs_due on jobs (status, run_at) where status = 'queued' or status = 'running';
