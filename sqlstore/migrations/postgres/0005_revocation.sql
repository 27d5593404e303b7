-- Revocation and bans (issue 22). The logical schema of
-- migrations/sqlite/0005_revocation.sql; times are Unix milliseconds (UTC)
-- in BIGINT, as in 0001.
--
-- revocation is written in the transaction of what causes it (a session
-- ended, a password changed, a user banned or deleted): kind session takes
-- back every JWT minted from the session whose id is subject (never its
-- cookie token); kind user every JWT of the user subject issued at or
-- before at; kind all every JWT issued at or before at (subject empty).
-- Every process polls it by id. A sequence hands ids out at insert, not at
-- commit, so concurrent writers could make id 8 visible before id 7 and a
-- poller past 8 would never see 7: every insert takes the transaction
-- advisory lock lockRevocations first (sqlstore/revocations.go), as the
-- last thing its transaction does, so ids become visible in order. A row is
-- swept once the newest token it could cover has expired (at + jwt_ttl +
-- leeway).
CREATE TABLE revocation (
	id      BIGSERIAL PRIMARY KEY,
	kind    TEXT NOT NULL CHECK (kind IN ('session', 'user', 'all')),
	subject TEXT NOT NULL,
	at      BIGINT NOT NULL
);
-- The sweep.
CREATE INDEX revocation_at ON revocation(at);

-- A ban, named as Better Auth's admin plugin names its fields: banned
-- users cannot sign in (403 BANNED_USER) until ban_expires (NULL: never).
ALTER TABLE "user" ADD COLUMN banned BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE "user" ADD COLUMN ban_reason TEXT;
ALTER TABLE "user" ADD COLUMN ban_expires BIGINT;
