-- The logical schema of migrations/sqlite/0001_init.sql: same tables,
-- columns and constraints. Times are Unix milliseconds (UTC) in BIGINT, so
-- every query and "db copy" treat both engines alike.
CREATE TABLE "user" (
	id             TEXT PRIMARY KEY,
	name           TEXT NOT NULL,
	email          TEXT NOT NULL UNIQUE,
	email_verified BOOLEAN NOT NULL DEFAULT false,
	image          TEXT,
	created_at     BIGINT NOT NULL,
	updated_at     BIGINT NOT NULL
);

CREATE TABLE account (
	id          TEXT PRIMARY KEY,
	account_id  TEXT NOT NULL,
	provider_id TEXT NOT NULL,
	user_id     TEXT NOT NULL REFERENCES "user"(id) ON DELETE CASCADE,
	password    TEXT,
	created_at  BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL,
	UNIQUE (provider_id, account_id)
);
CREATE INDEX account_user_id ON account(user_id);

CREATE TABLE session (
	id         TEXT PRIMARY KEY,
	token      TEXT NOT NULL UNIQUE,
	user_id    TEXT NOT NULL REFERENCES "user"(id) ON DELETE CASCADE,
	expires_at BIGINT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	ip_address TEXT NOT NULL DEFAULT '',
	user_agent TEXT NOT NULL DEFAULT '',
	remember   BOOLEAN NOT NULL DEFAULT true
);
CREATE INDEX session_user_id ON session(user_id);

CREATE TABLE jwks (
	id          TEXT PRIMARY KEY,
	public_key  TEXT NOT NULL,
	private_key TEXT NOT NULL,
	created_at  BIGINT NOT NULL,
	expires_at  BIGINT,
	alg         TEXT,
	crv         TEXT
);

CREATE TABLE user_role (
	user_id    TEXT NOT NULL REFERENCES "user"(id) ON DELETE CASCADE,
	role       TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (user_id, role)
);
