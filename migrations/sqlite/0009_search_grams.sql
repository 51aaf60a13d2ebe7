-- Substring search v3: beside each trigram index, an index of the column's 5-grams. A term of five or more
-- characters matches its rarest 5-grams, whose doclists are short where a trigram's are long: `123` is in
-- thousands of `user<N>@` emails, `12345` in a few. FTS5 has no 5-gram tokenizer, so the triggers cut the
-- 5-grams in SQL (one per character position: `json_each` over an array of `length - 4` zeros numbers
-- them) and store each as the hex of its UTF-8 bytes, a token every tokenizer keeps whole. The tables are
-- contentless (the grams are derived, never read back) with deletes by rowid; no positions, as above.
create virtual table subscribers_email_grams using fts5 (
    grams, content = '', contentless_delete = 1, tokenize = 'ascii', detail = none
);
create virtual table subscribers_phone_grams using fts5 (
    grams, content = '', contentless_delete = 1, tokenize = 'ascii', detail = none
);
create virtual table subscribers_full_name_grams using fts5 (
    grams, content = '', contentless_delete = 1, tokenize = 'ascii', detail = none
);

insert into subscribers_email_grams (rowid, grams)
select seq, (select group_concat(hex(substr(email, key + 1, 5)), ' ')
             from json_each('[' || rtrim(replace(hex(zeroblob(max(length(email) - 4, 0))), '00', '0,'), ',') || ']'))
from subscribers where length(email) >= 5;
insert into subscribers_phone_grams (rowid, grams)
select seq, (select group_concat(hex(substr(phone, key + 1, 5)), ' ')
             from json_each('[' || rtrim(replace(hex(zeroblob(max(length(phone) - 4, 0))), '00', '0,'), ',') || ']'))
from subscribers where length(phone) >= 5;
insert into subscribers_full_name_grams (rowid, grams)
select seq, (select group_concat(hex(substr(full_name, key + 1, 5)), ' ')
             from json_each('[' || rtrim(replace(hex(zeroblob(max(length(full_name) - 4, 0))), '00', '0,'), ',') || ']'))
from subscribers where length(full_name) >= 5;

create trigger subscribers_grams_insert after insert on subscribers begin
    insert into subscribers_email_grams (rowid, grams)
    select new.seq, (select group_concat(hex(substr(new.email, key + 1, 5)), ' ')
        from json_each('[' || rtrim(replace(hex(zeroblob(max(length(new.email) - 4, 0))), '00', '0,'), ',') || ']'))
    where length(new.email) >= 5;
    insert into subscribers_phone_grams (rowid, grams)
    select new.seq, (select group_concat(hex(substr(new.phone, key + 1, 5)), ' ')
        from json_each('[' || rtrim(replace(hex(zeroblob(max(length(new.phone) - 4, 0))), '00', '0,'), ',') || ']'))
    where length(new.phone) >= 5;
    insert into subscribers_full_name_grams (rowid, grams)
    select new.seq, (select group_concat(hex(substr(new.full_name, key + 1, 5)), ' ')
        from json_each('[' || rtrim(replace(hex(zeroblob(max(length(new.full_name) - 4, 0))), '00', '0,'), ',') || ']'))
    where length(new.full_name) >= 5;
end;
create trigger subscribers_grams_delete after delete on subscribers begin
    delete from subscribers_email_grams where rowid = old.seq;
    delete from subscribers_phone_grams where rowid = old.seq;
    delete from subscribers_full_name_grams where rowid = old.seq;
end;
create trigger subscribers_grams_update_email after update of email on subscribers begin
    delete from subscribers_email_grams where rowid = old.seq;
    insert into subscribers_email_grams (rowid, grams)
    select new.seq, (select group_concat(hex(substr(new.email, key + 1, 5)), ' ')
        from json_each('[' || rtrim(replace(hex(zeroblob(max(length(new.email) - 4, 0))), '00', '0,'), ',') || ']'))
    where length(new.email) >= 5;
end;
create trigger subscribers_grams_update_phone after update of phone on subscribers begin
    delete from subscribers_phone_grams where rowid = old.seq;
    insert into subscribers_phone_grams (rowid, grams)
    select new.seq, (select group_concat(hex(substr(new.phone, key + 1, 5)), ' ')
        from json_each('[' || rtrim(replace(hex(zeroblob(max(length(new.phone) - 4, 0))), '00', '0,'), ',') || ']'))
    where length(new.phone) >= 5;
end;
create trigger subscribers_grams_update_full_name after update of full_name on subscribers begin
    delete from subscribers_full_name_grams where rowid = old.seq;
    insert into subscribers_full_name_grams (rowid, grams)
    select new.seq, (select group_concat(hex(substr(new.full_name, key + 1, 5)), ' ')
        from json_each('[' || rtrim(replace(hex(zeroblob(max(length(new.full_name) - 4, 0))), '00', '0,'), ',') || ']'))
    where length(new.full_name) >= 5;
end;
