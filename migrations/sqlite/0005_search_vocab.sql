-- Substring search v2: one trigram index per column, without positions (detail=none keeps the doclists short;
-- searches recheck rows exactly), and vocabulary tables giving each trigram's document frequency so a search
-- can match only the rarest trigrams of its term.
drop trigger subscribers_search_insert;
drop trigger subscribers_search_delete;
drop trigger subscribers_search_update;
drop table subscribers_search;

create virtual table subscribers_email_search using fts5 (
    email, content = 'subscribers', content_rowid = 'seq', tokenize = 'trigram case_sensitive 1', detail = none
);
create virtual table subscribers_phone_search using fts5 (
    phone, content = 'subscribers', content_rowid = 'seq', tokenize = 'trigram case_sensitive 1', detail = none
);
create virtual table subscribers_full_name_search using fts5 (
    full_name, content = 'subscribers', content_rowid = 'seq', tokenize = 'trigram case_sensitive 1', detail = none
);
insert into subscribers_email_search (subscribers_email_search) values ('rebuild');
insert into subscribers_phone_search (subscribers_phone_search) values ('rebuild');
insert into subscribers_full_name_search (subscribers_full_name_search) values ('rebuild');

create trigger subscribers_search_insert after insert on subscribers begin
    insert into subscribers_email_search (rowid, email) values (new.seq, new.email);
    insert into subscribers_phone_search (rowid, phone) values (new.seq, new.phone);
    insert into subscribers_full_name_search (rowid, full_name) values (new.seq, new.full_name);
end;
create trigger subscribers_search_delete after delete on subscribers begin
    insert into subscribers_email_search (subscribers_email_search, rowid, email) values ('delete', old.seq, old.email);
    insert into subscribers_phone_search (subscribers_phone_search, rowid, phone) values ('delete', old.seq, old.phone);
    insert into subscribers_full_name_search (subscribers_full_name_search, rowid, full_name)
        values ('delete', old.seq, old.full_name);
end;
create trigger subscribers_search_update_email after update of email on subscribers begin
    insert into subscribers_email_search (subscribers_email_search, rowid, email) values ('delete', old.seq, old.email);
    insert into subscribers_email_search (rowid, email) values (new.seq, new.email);
end;
create trigger subscribers_search_update_phone after update of phone on subscribers begin
    insert into subscribers_phone_search (subscribers_phone_search, rowid, phone) values ('delete', old.seq, old.phone);
    insert into subscribers_phone_search (rowid, phone) values (new.seq, new.phone);
end;
create trigger subscribers_search_update_full_name after update of full_name on subscribers begin
    insert into subscribers_full_name_search (subscribers_full_name_search, rowid, full_name)
        values ('delete', old.seq, old.full_name);
    insert into subscribers_full_name_search (rowid, full_name) values (new.seq, new.full_name);
end;

create virtual table subscribers_email_vocab using fts5vocab(subscribers_email_search, 'row');
create virtual table subscribers_phone_vocab using fts5vocab(subscribers_phone_search, 'row');
create virtual table subscribers_full_name_vocab using fts5vocab(subscribers_full_name_search, 'row');
