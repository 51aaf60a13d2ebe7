-- SQLite's 0009 adds 5-gram indexes beside its trigram ones for long search terms. PostgreSQL's pg_trgm GIN
-- indexes already intersect the posting lists of all a term's trigrams. The version exists so both folders
-- keep the same numbers.
select 1;
