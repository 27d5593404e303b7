-- Revocation and bans (issue 22). The logical schema of
-- migrations/postgres/0005_revocation.sql; times are Unix milliseconds.
--
-- revocation is written in the transaction of what causes it (a session
-- ended, a password changed, a user banned or deleted): kind session takes
-- back every JWT minted from the session whose id is subject (never its
-- cookie token); kind user every JWT of the user subject issued at or
-- before at; kind all every JWT issued at or before at (subject empty).
-- Every process polls it by id: AUTOINCREMENT, so an id is never reused
-- once the rows above it are swept, and SQLite's one writer at a time
-- makes ids visible in commit order. A row is swept once the newest token
-- it could cover has expired (at + jwt_ttl + leeway).
CREATE TABLE revocation (
	id      INTEGER PRIMARY KEY AUTOINCREMENT,
	kind    TEXT NOT NULL CHECK (kind IN ('session', 'user', 'all')),
	subject TEXT NOT NULL,
	at      INTEGER NOT NULL
);
-- The sweep.
CREATE INDEX revocation_at ON revocation(at);

-- A ban, named as Better Auth's admin plugin names its fields: banned
-- users cannot sign in (403 BANNED_USER) until ban_expires (NULL: never).
ALTER TABLE "user" ADD COLUMN banned INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "user" ADD COLUMN ban_reason TEXT;
ALTER TABLE "user" ADD COLUMN ban_expires INTEGER;
