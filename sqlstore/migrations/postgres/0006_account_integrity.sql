-- Account integrity (issue 30). The logical schema of
-- migrations/sqlite/0006_account_integrity.sql, which explains it:
-- email_unclaimed marks an address from an identity provider that did not
-- verify it; such an address reserves nothing, so "user".email is unique
-- only among users that claim their address. The unique index keeps the
-- constraint's name: the store tells a taken address by it (dialect.go).
ALTER TABLE "user" ADD COLUMN email_unclaimed BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE "user" DROP CONSTRAINT user_email_key;
CREATE UNIQUE INDEX user_email_key ON "user"(email) WHERE NOT email_unclaimed;
CREATE INDEX user_email ON "user"(email);

UPDATE "user" u SET email_unclaimed = true
 WHERE NOT u.email_verified
   AND NOT EXISTS (SELECT 1 FROM account a WHERE a.user_id = u.id AND a.provider_id = 'credential')
   AND EXISTS (SELECT 1 FROM account a WHERE a.user_id = u.id AND a.provider_id <> 'credential');
