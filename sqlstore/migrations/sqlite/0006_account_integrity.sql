-- authsidecar: foreign_keys off
-- Account integrity (issue 30). The logical schema of
-- migrations/postgres/0006_account_integrity.sql.
--
-- email_unclaimed marks an address that came from an identity provider
-- that did not say it was verified (trust_unverified_email): the user
-- shows it, but it reserves nothing. A password sign-up with the same
-- address makes another user, email lookups (sign-in, reset, verification,
-- linking by email) never find this user, and no mail goes to it. So the
-- address is unique only among users that claim it: a partial index,
-- which needs the table rebuilt (SQLite cannot drop a column's UNIQUE).
-- This step runs with foreign keys off (the marker above; migrate.go):
-- dropping the old table would otherwise delete every account, session
-- and role through ON DELETE CASCADE. SQLite's documented rebuild: new
-- table, copy, drop, rename, then PRAGMA foreign_key_check before commit.
CREATE TABLE user_rebuilt (
	id              TEXT PRIMARY KEY,
	name            TEXT NOT NULL,
	email           TEXT NOT NULL,
	email_verified  INTEGER NOT NULL DEFAULT 0,
	image           TEXT,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	banned          INTEGER NOT NULL DEFAULT 0,
	ban_reason      TEXT,
	ban_expires     INTEGER,
	email_unclaimed INTEGER NOT NULL DEFAULT 0
);
INSERT INTO user_rebuilt (id, name, email, email_verified, image, created_at, updated_at, banned, ban_reason, ban_expires)
	SELECT id, name, email, email_verified, image, created_at, updated_at, banned, ban_reason, ban_expires FROM "user";
DROP TABLE "user";
ALTER TABLE user_rebuilt RENAME TO "user";
-- The name PostgreSQL's constraint had; SQLite's error names the column
-- ("UNIQUE constraint failed: user.email") whatever the index is called.
CREATE UNIQUE INDEX user_email_key ON "user"(email) WHERE email_unclaimed = 0;
-- Lookups of unclaimed addresses (the admin commands') use it too.
CREATE INDEX user_email ON "user"(email);

-- Users made before this step by a provider that said the address was not
-- verified: unverified, no password, at least one provider account. They
-- still sign in with their provider; their address no longer keeps its
-- owner from signing up or resetting.
UPDATE "user" SET email_unclaimed = 1
 WHERE email_verified = 0
   AND NOT EXISTS (SELECT 1 FROM account a WHERE a.user_id = "user".id AND a.provider_id = 'credential')
   AND EXISTS (SELECT 1 FROM account a WHERE a.user_id = "user".id AND a.provider_id <> 'credential');
