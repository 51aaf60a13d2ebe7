-- The environment's public identifier (Novu's `applicationIdentifier`, issue 24): what the Inbox's session
-- names the environment by. Not a secret. Environments created before it get 12 random hex characters.
alter table environments add column identifier text;
update environments set identifier = substr(md5(random()::text || id), 1, 12) where identifier is null;
create unique index environments_identifier on environments (identifier);
