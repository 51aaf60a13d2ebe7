-- SQLite only (per-column trigram indexes and their vocabularies); PostgreSQL keeps its pg_trgm indexes.
select 1;
