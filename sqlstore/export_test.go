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

// RaceImportForTest makes every ImportUsers batch run query, in its
// transaction, after it looked its users up and before it writes them: a
// user written in between, as by a sign-up while the sidecar serves.
// Not safe while a store is in use.
func RaceImportForTest(query string, args ...any) (restore func()) {
	importHooks.afterLookup = func(ctx context.Context, t tx) error {
		_, err := t.exec(ctx, query, args...)
		return err
	}
	return func() { importHooks.afterLookup = nil }
}
