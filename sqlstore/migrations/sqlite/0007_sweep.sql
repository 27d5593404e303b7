-- The sweep of expired sessions (issue 30; sqlstore/sweep.go). The logical
-- schema of migrations/postgres/0007_sweep.sql.
--
-- Every other table the Sweeper deletes from has its index on the time
-- column already (0002 rate_limit, 0003 recovery_token, 0004 oauth_state,
-- 0005 revocation); without this one, every run would read the whole
-- session table under the writer lock to find the expired few. IF NOT
-- EXISTS: an operator may have created it by hand ahead of the upgrade.
CREATE INDEX IF NOT EXISTS session_expires_at ON session(expires_at);
