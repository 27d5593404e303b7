// Package sqlstore stores users, sessions, keys, roles and shared rate
// limits in SQL: an embedded SQLite file (modernc.org/sqlite, pure Go) or a
// PostgreSQL server (github.com/jackc/pgx/v5 through database/sql). It
// implements issuer.Store, proxy.RoleLookup and what the admin CLI needs.
//
// One SQL provider serves both engines, as authelia's storage does: every
// query is written once, with "?" placeholders, and the few differences
// between the engines are the fields of a dialect value (dialect.go), not
// branches scattered through the queries. database/sql with pgx's stdlib
// driver is what makes that possible: pgxpool would give PostgreSQL its own
// query API and so a second copy of every query. database/sql's pool also
// reconnects by itself after the server returns, and honours the request
// context on every call.
//
// SQLite: writes go through a pool of exactly one connection and reads
// through another pool: SQLite allows one writer at a time, and funnelling
// writes through one connection turns contention into queueing in Go
// instead of SQLITE_BUSY errors, while WAL lets reads proceed beside it.
// PostgreSQL: one pool of Options.MaxConns connections does both.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// DB is an open authsidecar database.
type DB struct {
	w  *sql.DB // writes (SQLite: one connection)
	r  *sql.DB // reads (PostgreSQL: the same pool as w)
	dl *dialect
	// where names the database for logs and messages: the SQLite path, or
	// postgres://host:port/db, never with the password.
	where string
	// takes counts TakeToken calls, for the periodic sweep.
	takes atomic.Uint64
	// issues counts IssueRecoveryToken calls, for the sweep of expired
	// tokens; claims counts ClaimOutbox calls, for SweepOutbox.
	issues, claims atomic.Uint64
	// states counts SaveOAuthState calls, for the sweep of abandoned
	// sign-in flows.
	states atomic.Uint64

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

// String names the database: the SQLite file, or postgres://host:port/db
// (never the password).
func (db *DB) String() string { return db.where }

// Engine names the database engine: "sqlite" or "postgres".
func (db *DB) Engine() string { return db.dl.name }

// q returns query in the engine's placeholder syntax.
func (db *DB) q(query string) string { return db.dl.rebind(query) }

// Close closes the pools.
func (db *DB) Close() error {
	if db.r == db.w {
		return db.w.Close()
	}
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

// tx is a write transaction whose queries are written with "?" placeholders.
type tx struct {
	*sql.Tx
	db *DB
}

func (t tx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.ExecContext(ctx, t.db.q(query), args...)
}

func (t tx) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return t.QueryRowContext(ctx, t.db.q(query), args...)
}

func (t tx) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.QueryContext(ctx, t.db.q(query), args...)
}

// withTx runs fn in a write transaction and commits.
func (db *DB) withTx(ctx context.Context, fn func(tx) error) error {
	t, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx{t, db}); err != nil {
		t.Rollback()
		return err
	}
	if err := t.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (db *DB) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return db.w.ExecContext(ctx, db.q(query), args...)
}

func (db *DB) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return db.r.QueryRowContext(ctx, db.q(query), args...)
}

func (db *DB) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return db.r.QueryContext(ctx, db.q(query), args...)
}

// tables lists the tables Count accepts and Export copies, parents before
// children; table names cannot be bound as query parameters.
var tables = []string{"user", "account", "session", "jwks", "user_role", "recovery_token", "outbox", "oauth_state"}

// Count returns the number of rows in one of the tables.
func (db *DB) Count(ctx context.Context, table string) (int, error) {
	known := false
	for _, t := range tables {
		known = known || t == table
	}
	if !known {
		return 0, fmt.Errorf("count: unknown table %q", table)
	}
	var n int
	if err := db.queryRow(ctx, `SELECT count(*) FROM "`+table+`"`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count %s: %w", table, err)
	}
	return n, nil
}
