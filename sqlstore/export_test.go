package sqlstore

import (
	"context"
	"fmt"
)

// SetUserVersionForTest lets tests simulate a database from a newer binary.
func (db *DB) SetUserVersionForTest(ctx context.Context, v int) error {
	_, err := db.w.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v))
	return err
}

// SlowRevocationCommitsForTest pauses every transaction that inserts
// revocations for pause() between the insert and its commit, and, when
// unlocked, leaves out the lock that orders their ids; restore undoes
// both. Not safe while a store is in use.
func SlowRevocationCommitsForTest(pause func(), unlocked bool) (restore func()) {
	testHooks.afterInsert, testHooks.noLock = pause, unlocked
	return func() { testHooks.afterInsert, testHooks.noLock = nil, false }
}

// HoldSweepLockForTest takes the sweep lock as a running Sweeper does;
// ok is false when another holds it.
func (db *DB) HoldSweepLockForTest(ctx context.Context) (unlock func(), ok bool, err error) {
	return db.trySweepLock(ctx)
}

// SweepQueriesForTest returns the statements a sweep of kind runs: the
// batch delete and the count, each with the cutoff (and the batch's
// limit) as "?" arguments.
func (db *DB) SweepQueriesForTest(kind SweepKind) []string {
	return []string{db.sweepBatchQuery(kind), countExpiredQuery(kind)}
}
