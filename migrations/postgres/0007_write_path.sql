-- The write path of a trigger. `status` leaves the key of the jobs-by-transaction index: every claim and
-- completion changed the status and so moved the job's entry to another place of the index, a page
-- written twice more per job. Cancelling (the index's reader) filters the few jobs of one transaction by
-- status just as well.
drop index jobs_transaction;
create index jobs_transaction on jobs (environment_id, transaction_id);
