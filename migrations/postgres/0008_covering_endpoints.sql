-- SQLite's 0008 makes the endpoints-by-subscriber and endpoints-by-context indexes covering. PostgreSQL
-- keeps them narrow: an INCLUDE of the endpoint's JSON would make an insert fail once an index tuple
-- outgrows a third of a page (a long webhook URL), and its heap reads go through shared buffers, not a
-- system call per page. The version exists so both folders keep the same numbers.
select 1;
