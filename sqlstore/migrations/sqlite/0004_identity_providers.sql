-- Sign-in with identity providers (issue 21). The logical schema of
-- migrations/postgres/0004_identity_providers.sql; times are Unix
-- milliseconds.
--
-- An account row of a provider (provider_id = the configured id,
-- account_id = the provider's subject) keeps the provider's tokens as
-- Better Auth does, but sealed with a key derived from AUTH_SECRET
-- (XChaCha20-Poly1305, bound to the row and column): a dump of the
-- database holds no usable provider token. NULL: none. scope is the
-- granted scopes joined with "," (Better Auth's form).
ALTER TABLE account ADD COLUMN access_token BLOB;
ALTER TABLE account ADD COLUMN refresh_token BLOB;
ALTER TABLE account ADD COLUMN id_token BLOB;
ALTER TABLE account ADD COLUMN access_token_expires_at INTEGER;
ALTER TABLE account ADD COLUMN refresh_token_expires_at INTEGER;
ALTER TABLE account ADD COLUMN scope TEXT NOT NULL DEFAULT '';

-- oauth_state is one sign-in or link flow between POST sign-in/social and
-- the provider's callback: single use (the callback deletes it before it
-- acts), 10 minutes, keyed by the SHA-256 of the state parameter (the
-- browser's cookie holds the state itself). payload is the flow (PKCE
-- verifier, nonce, callback URLs, link), sealed like the tokens above.
CREATE TABLE oauth_state (
	hash        BLOB PRIMARY KEY CHECK (length(hash) = 32),
	provider_id TEXT NOT NULL,
	payload     BLOB NOT NULL,
	expires_at  INTEGER NOT NULL,
	created_at  INTEGER NOT NULL
);
-- The sweep of abandoned flows.
CREATE INDEX oauth_state_expires_at ON oauth_state(expires_at);
