package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrations embed.FS

// migration is one numbered schema step.
type migration struct {
	version int
	name    string
	body    string
}

// list returns the engine's migrations in order, checking the numbering
// is contiguous from 0001.
func (d *dialect) list() ([]migration, error) {
	names, err := fs.Glob(migrations, d.migrations+"/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	sort.Strings(names)
	out := make([]migration, 0, len(names))
	for i, name := range names {
		base := strings.TrimPrefix(name, d.migrations+"/")
		if n, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0]); err != nil || n != i+1 {
			return nil, fmt.Errorf("migration %s: numbering must be contiguous from 0001", base)
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", base, err)
		}
		out = append(out, migration{version: i + 1, name: base, body: string(body)})
	}
	return out, nil
}

// migrate applies, in order and each in its own transaction, every
// embedded migration newer than the database's schema version.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := db.dl.list()
	if err != nil {
		return err
	}
	if db.dl == sqliteDialect {
		return db.migrateSQLite(ctx, ms)
	}
	return db.migratePostgres(ctx, ms)
}

// migrateSQLite keeps the version in PRAGMA user_version, as every
// database file made before PostgreSQL support does. Each step reads the
// version inside its write transaction (BEGIN IMMEDIATE), so processes
// opening a new file at the same moment take turns instead of both
// applying 0001. An up-to-date file, the usual case, is only read.
func (db *DB) migrateSQLite(ctx context.Context, ms []migration) error {
	var current int
	if err := db.w.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if err := tooNew(current, len(ms)); err != nil || current == len(ms) {
		return err
	}
	for {
		done, err := db.migrateSQLiteStep(ctx, ms)
		if err != nil || done {
			return err
		}
	}
}

// fkOff is the first line of a SQLite migration that rebuilds a table
// others reference: it runs with foreign keys off, as SQLite's documented
// procedure for schema changes ALTER TABLE cannot make requires, because
// dropping the old table with them on would delete every referencing
// row through ON DELETE CASCADE. The step checks the keys before it
// commits (PRAGMA foreign_key_check), so a rebuild that broke one is
// rolled back.
const fkOff = "-- authsidecar: foreign_keys off\n"

// migrateSQLiteStep applies the next migration; done when none is left.
// It runs on one connection of its own: PRAGMA foreign_keys is a
// connection's setting, and a no-op inside a transaction, so it is set
// around the transaction (the writer pool has one connection; pinning it
// makes that explicit). The connection is discarded afterwards rather
// than returned with foreign keys off, should turning them on fail.
func (db *DB) migrateSQLiteStep(ctx context.Context, ms []migration) (done bool, err error) {
	conn, err := db.w.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	// The version is read again once the write transaction holds the
	// lock; this first read only decides whether foreign keys go off.
	var current int
	if err := conn.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&current); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	if err := tooNew(current, len(ms)); err != nil || current == len(ms) {
		return true, err
	}
	fkOffStep := strings.HasPrefix(ms[current].body, fkOff)
	if fkOffStep {
		if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
			return false, fmt.Errorf("migration %s: %w", ms[current].name, err)
		}
		defer func() {
			if _, err := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA foreign_keys = ON`); err != nil {
				conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}()
	}
	sqlTx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	t := tx{sqlTx, db}
	err = func() error {
		if err := t.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&current); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if err := tooNew(current, len(ms)); err != nil || current == len(ms) {
			done = true
			return err
		}
		if strings.HasPrefix(ms[current].body, fkOff) != fkOffStep {
			// Another process migrated in between: the next call takes
			// the next step, with the right setting.
			return nil
		}
		step := &ms[current]
		if _, err := t.ExecContext(ctx, step.body); err != nil {
			return fmt.Errorf("migration %s: %w", step.name, err)
		}
		if fkOffStep {
			if err := foreignKeyCheck(ctx, t); err != nil {
				return fmt.Errorf("migration %s: %w", step.name, err)
			}
		}
		if _, err := t.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, step.version)); err != nil {
			return fmt.Errorf("migration %s: %w", step.name, err)
		}
		return nil
	}()
	if err != nil {
		sqlTx.Rollback()
		return false, err
	}
	if err := sqlTx.Commit(); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	return done, nil
}

// foreignKeyCheck fails when any row references a row that does not
// exist, naming the first.
func foreignKeyCheck(ctx context.Context, t tx) error {
	rows, err := t.QueryContext(ctx, `PRAGMA foreign_key_check`)
	if err != nil {
		return fmt.Errorf("foreign key check: %w", err)
	}
	defer rows.Close()
	if rows.Next() {
		var table, parent string
		var rowid sql.NullInt64
		var fkid int
		if err := rows.Scan(&table, &rowid, &parent, &fkid); err != nil {
			return fmt.Errorf("foreign key check: %w", err)
		}
		return fmt.Errorf("foreign key check: a row of %s (rowid %d) references a missing row of %s", table, rowid.Int64, parent)
	}
	return rows.Err()
}

// migratePostgres holds a session advisory lock on one connection while it
// reads the version and applies what is missing: replicas started at the
// same moment on an empty database take turns, and the second finds the
// work done. DDL is transactional in PostgreSQL, so a failed step leaves
// nothing half applied.
func (db *DB) migratePostgres(ctx context.Context, ms []migration) error {
	unlock, err := db.advisoryLock(ctx, lockMigrate)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer unlock()
	if _, err := db.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var current int
	if err := db.w.QueryRowContext(ctx, `SELECT COALESCE(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if err := tooNew(current, len(ms)); err != nil {
		return err
	}
	for _, m := range ms[current:] {
		err := db.withTx(ctx, func(t tx) error {
			if _, err := t.ExecContext(ctx, m.body); err != nil {
				return err
			}
			_, err := t.exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES (?, ?)`, m.version, m.name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}

func tooNew(current, known int) error {
	if current > known {
		return fmt.Errorf("database schema version %d is newer than this binary knows (%d): refusing to run an old binary on it", current, known)
	}
	return nil
}

// advisoryLock takes a PostgreSQL session advisory lock on a connection of
// its own and returns the function that releases it. Waiting honours ctx.
func (db *DB) advisoryLock(ctx context.Context, key int64) (unlock func(), err error) {
	conn, err := db.w.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		conn.Close()
		return nil, fmt.Errorf("lock: %w", err)
	}
	return releaser(ctx, conn, key), nil
}

// tryAdvisoryLock is advisoryLock without the wait: ok is false, and
// nothing is held, when another session holds the lock.
func (db *DB) tryAdvisoryLock(ctx context.Context, key int64) (unlock func(), ok bool, err error) {
	conn, err := db.w.Conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("lock: %w", err)
	}
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil || !ok {
		conn.Close()
		if err != nil {
			return nil, false, fmt.Errorf("lock: %w", err)
		}
		return nil, false, nil
	}
	return releaser(ctx, conn, key), true, nil
}

// releaser returns the function that releases the session advisory lock
// key held on conn, and conn with it.
func releaser(ctx context.Context, conn *sql.Conn, key int64) func() {
	return func() {
		// A failed unlock (server gone) releases with the session anyway;
		// the connection is not returned to the pool in that case.
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key); err != nil {
			conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		conn.Close()
	}
}
