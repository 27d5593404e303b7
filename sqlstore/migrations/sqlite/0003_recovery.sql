-- Account recovery (issue 16). The logical schema of
-- migrations/postgres/0003_recovery.sql; times are Unix milliseconds.
--
-- recovery_token holds password-reset and email-verification tokens as
-- their SHA-256 only: the database never holds a usable link. email is the
-- address the link was sent to; a verification fails if the user's
-- address changed since. No CHECK on kind: a later kind (say, an email
-- change) would otherwise need SQLite's table rebuild.
CREATE TABLE recovery_token (
	hash       BLOB PRIMARY KEY CHECK (length(hash) = 32),
	kind       TEXT NOT NULL,
	user_id    TEXT NOT NULL REFERENCES "user"(id) ON DELETE CASCADE,
	email      TEXT NOT NULL,
	expires_at INTEGER NOT NULL,
	created_at INTEGER NOT NULL
);
-- A new link replaces the user's older ones of its kind.
CREATE INDEX recovery_token_user_kind ON recovery_token(user_id, kind);
-- The sweep of expired tokens.
CREATE INDEX recovery_token_expires_at ON recovery_token(expires_at);

-- outbox is the durable mail queue, written in the token's transaction.
-- payload is the message sealed with a key derived from AUTH_SECRET (it
-- holds the link); the CHECK makes "deleted once delivered or dead" a
-- property of the schema, not only of the code. Rows do not reference
-- users: a deleted user's queued mail may still go, its link no longer
-- works. lease_owner and lease_until are the claim of one replica's
-- worker; an expired lease is free.
CREATE TABLE outbox (
	id              TEXT PRIMARY KEY,
	kind            TEXT NOT NULL,
	-- who the message is for, so a dead one can be replaced by a new link
	-- ("outbox retry"); not a reference: the row outlives a deleted user.
	user_id         TEXT NOT NULL DEFAULT '',
	payload         BLOB,
	state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
	attempts        INTEGER NOT NULL DEFAULT 0,
	created_at      INTEGER NOT NULL,
	next_attempt_at INTEGER NOT NULL,
	lease_owner     TEXT,
	lease_until     INTEGER,
	last_error      TEXT NOT NULL DEFAULT '',
	delivered_at    INTEGER,
	CHECK (state = 'pending' OR payload IS NULL)
);
-- The claim: pending rows due now, in its order (next_attempt_at, id),
-- so a claim reads only the rows it takes, never sorts the backlog.
CREATE INDEX outbox_claim ON outbox(state, next_attempt_at, id);
