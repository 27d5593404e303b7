-- Sign-in with identity providers (issue 21). The logical schema of
-- migrations/sqlite/0004_identity_providers.sql; times are Unix
-- milliseconds (UTC) in BIGINT, as in 0001.
--
-- An account row of a provider (provider_id = the configured id,
-- account_id = the provider's subject) keeps the provider's tokens as
-- Better Auth does, but sealed with a key derived from AUTH_SECRET
-- (XChaCha20-Poly1305, bound to the row and column): a dump of the
-- database holds no usable provider token. NULL: none. scope is the
-- granted scopes joined with "," (Better Auth's form).
ALTER TABLE account ADD COLUMN access_token BYTEA;
ALTER TABLE account ADD COLUMN refresh_token BYTEA;
ALTER TABLE account ADD COLUMN id_token BYTEA;
ALTER TABLE account ADD COLUMN access_token_expires_at BIGINT;
ALTER TABLE account ADD COLUMN refresh_token_expires_at BIGINT;
ALTER TABLE account ADD COLUMN scope TEXT NOT NULL DEFAULT '';

-- oauth_state is one sign-in or link flow between POST sign-in/social and
-- the provider's callback: single use (the callback deletes it before it
-- acts), 10 minutes, keyed by the SHA-256 of the state parameter (the
-- browser's cookie holds the state itself). payload is the flow (PKCE
-- verifier, nonce, callback URLs, link), sealed like the tokens above.
CREATE TABLE oauth_state (
	hash        BYTEA PRIMARY KEY CHECK (octet_length(hash) = 32),
	provider_id TEXT NOT NULL,
	payload     BYTEA NOT NULL,
	expires_at  BIGINT NOT NULL,
	created_at  BIGINT NOT NULL
);
-- The sweep of abandoned flows.
CREATE INDEX oauth_state_expires_at ON oauth_state(expires_at);
