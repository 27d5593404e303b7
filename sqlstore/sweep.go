package sqlstore

import (
	"context"
	"fmt"
	"time"
)

// The sweep's queries: what counts as worthless in each table, deleted in
// batches by the Sweeper (sweeper.go). Every condition is served by an
// index on its time column (migrations 0002 to 0005, and 0007 for
// session), so a batch reads only the rows it deletes and a count only
// the expired ones, however many live rows the table holds.

// SweepKind names a kind of row the Sweeper deletes: the label of its
// metrics and the key of its log line.
type SweepKind string

// The kinds, in the order a run sweeps them: sessions first, the table a
// sign-in flood grows.
const (
	// SweepSessions: sessions at or past their expiry, which every reader
	// refuses already (issuer: a session found expired is no session).
	SweepSessions SweepKind = "session"
	// SweepRecoveryTokens: password-reset, verification and
	// change-of-address tokens at or past their expiry (a spent token is
	// deleted when it is spent).
	SweepRecoveryTokens SweepKind = "recovery_token"
	// SweepOAuthStates: identity-provider sign-in flows at or past their
	// expiry, abandoned at the provider (a completed flow is deleted by
	// its callback).
	SweepOAuthStates SweepKind = "oauth_state"
	// SweepRateLimits: rate-limit buckets untouched for bucketTTL, which
	// have refilled under any rate the config accepts (a missing bucket
	// is a full one).
	SweepRateLimits SweepKind = "rate_limit"
	// SweepRevocations: revocations older than the longest a token can
	// live (jwt_ttl plus the leeway): every token they cover has expired.
	SweepRevocations SweepKind = "revocation"
)

// SweepKinds lists every kind, in the order a run sweeps them.
func SweepKinds() []SweepKind {
	return []SweepKind{SweepSessions, SweepRecoveryTokens, SweepOAuthStates, SweepRateLimits, SweepRevocations}
}

// sweepTable is where a kind's rows live and when one is worthless.
type sweepTable struct {
	table string
	// key is the primary key: a batch selects keys, then deletes by them.
	key string
	// expired is the condition on the time column, with one "?" for the
	// cutoff: a row matching it at the cutoff is worthless.
	expired string
}

var sweepTables = map[SweepKind]sweepTable{
	// A session is refused once now is not before expires_at, a token and
	// a flow likewise: equal to the cutoff is expired.
	SweepSessions:       {"session", "id", "expires_at <= ?"},
	SweepRecoveryTokens: {"recovery_token", "hash", "expires_at <= ?"},
	SweepOAuthStates:    {"oauth_state", "hash", "expires_at <= ?"},
	SweepRateLimits:     {"rate_limit", "key", "updated_at < ?"},
	// The revocation set drops an entry older than now less its TTL
	// (revocation.Set.Sweep): the same strict comparison.
	SweepRevocations: {"revocation", "id", "at < ?"},
}

// sweepBatch deletes up to limit rows of kind that are worthless at
// cutoff, in one statement (its own short transaction), and returns how
// many. On PostgreSQL rows a request holds are skipped, not waited for
// (dialect.skipLocked): the next batch or run takes them.
func (db *DB) sweepBatch(ctx context.Context, kind SweepKind, cutoff time.Time, limit int) (int64, error) {
	db.observe(ctx, "sweep_"+string(kind))
	res, err := db.exec(ctx, db.sweepBatchQuery(kind), ms(cutoff), limit)
	if err != nil {
		return 0, fmt.Errorf("sweep %s: %w", kind, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sweep %s: %w", kind, err)
	}
	return n, nil
}

// sweepBatchQuery deletes up to ? rows worthless at ?: the keys of the
// batch are read from the time column's index, the rows deleted by key.
func (db *DB) sweepBatchQuery(kind SweepKind) string {
	st := sweepTables[kind]
	return `DELETE FROM ` + st.table + ` WHERE ` + st.key + ` IN (SELECT ` + st.key + ` FROM ` + st.table +
		` WHERE ` + st.expired + ` LIMIT ?` + db.dl.skipLocked + `)`
}

// countExpiredQuery counts the rows worthless at ?.
func countExpiredQuery(kind SweepKind) string {
	st := sweepTables[kind]
	return `SELECT count(*) FROM ` + st.table + ` WHERE ` + st.expired
}

// countExpired returns how many rows of kind are worthless at cutoff: an
// index range read of the expired rows only, on the read pool (SQLite's
// writer is not held for it).
func (db *DB) countExpired(ctx context.Context, kind SweepKind, cutoff time.Time) (int64, error) {
	db.observe(ctx, "count_expired_"+string(kind))
	var n int64
	if err := db.queryRow(ctx, countExpiredQuery(kind), ms(cutoff)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count expired %s: %w", kind, err)
	}
	return n, nil
}

// trySweepLock makes one replica at a time sweep. On PostgreSQL it takes
// the session advisory lock lockSweep on a connection of its own, without
// waiting: ok is false when another replica holds it (that one is
// sweeping). The batches run through the pool meanwhile, as the work
// under LockKeys does (OpenPostgres keeps two connections at least). On
// SQLite there is nothing to take: one process owns the file, and its
// writers are serialized anyway.
func (db *DB) trySweepLock(ctx context.Context) (unlock func(), ok bool, err error) {
	if !db.dl.fleetLocks {
		return func() {}, true, nil
	}
	db.observe(ctx, "lock_sweep")
	return db.tryAdvisoryLock(ctx, lockSweep)
}
