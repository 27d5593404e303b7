// Package sqlite stores users, sessions, keys and roles in a SQLite file
// through modernc.org/sqlite (pure Go, no cgo). It implements issuer.Store.
//
// Writes go through a pool of exactly one connection and reads through
// another pool: SQLite allows one writer at a time, and funnelling writes
// through one connection turns contention into queueing in Go instead of
// SQLITE_BUSY errors, while WAL lets reads proceed beside it.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DB is an open authsidecar database.
type DB struct {
	w *sql.DB // one connection: every write
	r *sql.DB // reads

	// Observe, when set, is called once per query with the request context
	// and a short name of the operation: metrics count database work per
	// route class with it. Set it before the DB is shared. Zero: not called.
	Observe func(ctx context.Context, op string)
}

func (db *DB) observe(ctx context.Context, op string) {
	if db.Observe != nil {
		db.Observe(ctx, op)
	}
}

// Open opens (creating with mode 0600 if needed) and migrates the database
// at path.
func Open(ctx context.Context, path string) (*DB, error) {
	// Create the file ourselves so it is never world-readable: it holds
	// password hashes and encrypted keys.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	f.Close()

	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_time_format", "sqlite")
	w, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode()+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)
	r, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	n := max(4, runtime.GOMAXPROCS(0)*2)
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	db := &DB{w: w, r: r}
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Close closes both pools.
func (db *DB) Close() error {
	return errors.Join(db.r.Close(), db.w.Close())
}

// Ping runs a real query on a table, not just a connection check.
func (db *DB) Ping(ctx context.Context) error {
	db.observe(ctx, "ping")
	var n int
	if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM jwks`).Scan(&n); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

func fromNullMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMS(v.Int64)
}

func nullMS(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: ms(t), Valid: true}
}

// withTx runs fn in a write transaction and commits.
func (db *DB) withTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// countable lists the tables Count accepts; table names cannot be bound
// as query parameters.
var countable = map[string]string{
	"user": `SELECT count(*) FROM "user"`, "account": `SELECT count(*) FROM account`,
	"session": `SELECT count(*) FROM session`, "jwks": `SELECT count(*) FROM jwks`,
	"user_role": `SELECT count(*) FROM user_role`,
}

// Count returns the number of rows in one of the tables.
func (db *DB) Count(ctx context.Context, table string) (int, error) {
	q, ok := countable[table]
	if !ok {
		return 0, fmt.Errorf("count: unknown table %q", table)
	}
	var n int
	if err := db.r.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("count %s: %w", table, err)
	}
	return n, nil
}
