-- Only digest jobs have a digest key. The index of digest keys kept an entry for every job, and its `status`
-- column changed at every claim and completion, so each of those moved an entry nobody reads; now it holds
-- the digest jobs alone. Its queries (`digest_key = ?`) imply `digest_key is not null` and still use it; with
-- `run_at` in the key, the open-window lookup (`… and status = 'queued' order by run_at`) reads it instead of
-- walking every queued job of the due index.
drop index jobs_digest;
create index jobs_digest on jobs (digest_key, status, run_at) where digest_key is not null;
