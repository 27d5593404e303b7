package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/authsidecar/authsidecar/revocation"
)

// Revocations are written in the transaction of what causes them (revokeTx)
// and read by every process's poller in id order (RevocationsSince).
//
// Ids must become visible in the order they are handed out, or a poller
// that has read id 8 would never read id 7 when 7 commits after it. SQLite
// gives that for free: one writer at a time, so a transaction that takes
// an id commits before the next one starts. A PostgreSQL sequence does
// not: it hands ids out at insert, and transactions commit in any order.
// So every insert first takes the transaction-level advisory lock
// lockRevocations, as the last thing its transaction does: the next
// writer gets the lock, and its id, only once this transaction has ended,
// and PostgreSQL makes a commit visible before it releases the
// transaction's locks. An id is therefore only ever handed out after
// every smaller one is visible or rolled back, and a reader that has seen
// id n has seen every committed id below it. Taking the lock last means
// it is held only for the insert and the commit, and never while waiting
// for a row lock, so it cannot take part in a deadlock.
// TestConformance/*/RevocationsConcurrentWriters hammers this.

// revokeTx runs fn in a write transaction, then inserts the revocations fn
// appended to *revs, under the lock, and commits; after the commit it
// reports them to OnRevoke.
func (db *DB) revokeTx(ctx context.Context, fn func(t tx, revs *[]revocation.Record) error) error {
	var revs []revocation.Record
	err := db.withTx(ctx, func(t tx) error {
		revs = revs[:0]
		if err := fn(t, &revs); err != nil {
			return err
		}
		return insertRevocations(ctx, t, revs)
	})
	if err == nil && db.OnRevoke != nil && len(revs) > 0 {
		db.OnRevoke(revs)
	}
	return err
}

// testHooks let the hammer test prove it can fail: without the lock, and
// with a pause between the insert and the commit, concurrent writers
// commit out of id order.
var testHooks struct {
	noLock      bool
	afterInsert func()
}

func insertRevocations(ctx context.Context, t tx, revs []revocation.Record) error {
	if len(revs) == 0 {
		return nil
	}
	if t.db.dl.lockRevocations != "" && !testHooks.noLock {
		if _, err := t.exec(ctx, t.db.dl.lockRevocations); err != nil {
			return fmt.Errorf("lock revocations: %w", err)
		}
	}
	for _, r := range revs {
		if _, err := t.exec(ctx, `INSERT INTO revocation (kind, subject, at) VALUES (?, ?, ?)`, r.Kind.String(), r.Subject, ms(r.At)); err != nil {
			return fmt.Errorf("insert %s revocation: %w", r.Kind, err)
		}
	}
	if testHooks.afterInsert != nil {
		testHooks.afterInsert()
	}
	return nil
}

// RevocationsSince returns up to limit revocations with ids above after,
// in id order: one range read of the primary key. A poller passes the
// largest id it has read.
func (db *DB) RevocationsSince(ctx context.Context, after int64, limit int) ([]revocation.Record, error) {
	db.observe(ctx, "revocations_since")
	rows, err := db.query(ctx, `SELECT id, kind, subject, at FROM revocation WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read revocations: %w", err)
	}
	defer rows.Close()
	var out []revocation.Record
	for rows.Next() {
		var r revocation.Record
		var kind string
		var at int64
		if err := rows.Scan(&r.ID, &kind, &r.Subject, &at); err != nil {
			return nil, fmt.Errorf("read revocations: %w", err)
		}
		if r.Kind, err = revocation.ParseKind(kind); err != nil {
			return nil, fmt.Errorf("revocation %d: %w", r.ID, err)
		}
		r.At = fromMS(at)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read revocations: %w", err)
	}
	return out, nil
}

// RevokeAll revokes every JWT issued up to now, for everyone ("keys
// revoke-all"): AUTH_SECRET's effect without losing the keys or the cookie
// sessions, which get new JWTs at their next get-session.
func (db *DB) RevokeAll(ctx context.Context, now time.Time) error {
	db.observe(ctx, "revoke_all")
	return db.revokeTx(ctx, func(_ tx, revs *[]revocation.Record) error {
		*revs = append(*revs, revocation.Record{Kind: revocation.KindAll, At: now})
		return nil
	})
}

// userRevocation and sessionRevocation are the records the store methods
// write.
func userRevocation(userID string, now time.Time) revocation.Record {
	return revocation.Record{Kind: revocation.KindUser, Subject: userID, At: now}
}

func sessionRevocation(sessionID string, now time.Time) revocation.Record {
	return revocation.Record{Kind: revocation.KindSession, Subject: sessionID, At: now}
}
