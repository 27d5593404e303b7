package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
)

// bucketTTL: a bucket untouched this long has refilled under any rate the
// config accepts, so it can go (a missing bucket is a full one).
const bucketTTL = 24 * time.Hour

// sweepEvery: one take in this many also deletes buckets older than
// bucketTTL.
const sweepEvery = 256

// TakeToken takes one token from the bucket named key in one transaction:
// the row is read locked (FOR UPDATE on PostgreSQL; SQLite's write
// transactions are serialized), r.Take decides, and the result is written
// back. Two replicas taking from one bucket at once therefore queue
// instead of both spending the same token.
func (db *DB) TakeToken(ctx context.Context, key string, r issuer.Rate, now time.Time) (time.Duration, error) {
	db.observe(ctx, "take_token")
	var wait time.Duration
	err := db.withTx(ctx, func(t tx) error {
		// Make sure the row exists so FOR UPDATE has something to lock: two
		// first takes would otherwise both see no row.
		if _, err := t.exec(ctx, `INSERT INTO rate_limit (key, tokens, updated_at) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING`,
			key, float64(r.N), ms(now)); err != nil {
			return fmt.Errorf("rate limit: %w", err)
		}
		var b issuer.Bucket
		var at int64
		err := t.queryRow(ctx, `SELECT tokens, updated_at FROM rate_limit WHERE key = ?`+db.dl.forUpdate, key).Scan(&b.Tokens, &at)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("rate limit: bucket %q vanished", key)
		}
		if err != nil {
			return fmt.Errorf("rate limit: %w", err)
		}
		b.At = fromMS(at)
		var next issuer.Bucket
		next, wait = r.Take(b, true, now)
		if _, err := t.exec(ctx, `UPDATE rate_limit SET tokens = ?, updated_at = ? WHERE key = ?`, next.Tokens, ms(next.At), key); err != nil {
			return fmt.Errorf("rate limit: %w", err)
		}
		return nil
	})
	// Now and then, forget buckets that have long refilled, so a flood of
	// distinct emails does not grow the table without end. Outside the
	// transaction: two sweeps inside row-locking transactions could
	// deadlock each other, and a sweep that fails costs nothing (the next
	// one does the work), so its error is not the caller's.
	if err == nil && db.takes.Add(1)%sweepEvery == 0 {
		db.exec(ctx, `DELETE FROM rate_limit WHERE updated_at < ?`, ms(now.Add(-bucketTTL)))
	}
	return wait, err
}
