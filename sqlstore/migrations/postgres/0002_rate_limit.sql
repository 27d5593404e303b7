-- Token buckets shared by every process on the database: a sign-in limit
-- per email must hold however many replicas the guesses are spread over.
-- tokens is what was left at updated_at (Unix milliseconds).
CREATE TABLE rate_limit (
	key        TEXT PRIMARY KEY,
	tokens     DOUBLE PRECISION NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE INDEX rate_limit_updated_at ON rate_limit(updated_at);
