package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/authsidecar/authsidecar/internal/errlist"
	"github.com/authsidecar/authsidecar/issuer"
)

// Inspection is what InspectSQLite or InspectPostgres read from a database
// without creating, migrating or writing anything: what "authsidecar
// check" reports before serve would touch it.
type Inspection struct {
	// Where names the database as DB.String does.
	Where string
	// Exists is false when there is nothing for serve to open as it is:
	// the SQLite file is missing, or the PostgreSQL database has no
	// schema_migrations table. Serve creates them.
	Exists bool
	// Version is the database's schema version, the number of migrations
	// applied. Zero when !Exists.
	Version int
	// Known is the number of migrations this binary holds.
	Known int
	// Keys are the jwks rows, still sealed with the secret. Nil when the
	// schema has no jwks table yet (Version 0) or is newer than Known.
	Keys []issuer.KeyRecord
}

// Pending is the number of migrations serve would apply.
func (in Inspection) Pending() int { return max(in.Known-in.Version, 0) }

// InspectSQLite reads the SQLite database at path without changing the file
// system: a missing file is not created (Exists is false, and the error
// says whether serve could create it), and an existing one is opened
// read-only. The error joins every problem found, among them what would
// stop serve from writing the file or the -wal and -shm files beside it;
// the Inspection holds what could be read regardless.
func InspectSQLite(ctx context.Context, path string) (Inspection, error) {
	in := Inspection{Where: path}
	ms, err := sqliteDialect.list()
	if err != nil {
		return in, err
	}
	in.Known = len(ms)
	dir := filepath.Dir(path)
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Serve creates the file, not its directory.
		if err := canCreateIn(dir); err != nil {
			return in, fmt.Errorf("does not exist, and serve could not create it: %w", err)
		}
		return in, nil
	case err != nil:
		return in, fmt.Errorf("open database: %w", err)
	case info.IsDir():
		return in, errors.New("is a directory, not a database file")
	}
	in.Exists = true
	// Serve writes the file, and (WAL) creates -wal and -shm beside it.
	var probs []error
	if err := writable(path); err != nil {
		probs = append(probs, fmt.Errorf("serve could not write the file: %w", err))
	}
	if err := canCreateIn(dir); err != nil {
		probs = append(probs, fmt.Errorf("serve could not create its -wal and -shm files: %w", err))
	}
	immutable, err := atRest(path)
	if err != nil {
		return in, errors.Join(append(probs, err)...)
	}
	err = inspectSQLiteFile(ctx, path, immutable, &in)
	if immutable && exists(path+"-wal") {
		// A serve started while we read, and an immutable read does not
		// see its WAL: read again the way a live database is read (its
		// -wal and -shm are there now).
		in.Keys = nil
		err = inspectSQLiteFile(ctx, path, false, &in)
	}
	return in, errors.Join(append(probs, err)...)
}

// canCreateIn reports whether this process may create files in dir, which
// must exist: serve creates the database file, not the directories above
// it.
func canCreateIn(dir string) error {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("directory %s does not exist (serve creates the file, not its directory)", dir)
	case err != nil:
		return fmt.Errorf("directory %s: %w", dir, err)
	case !info.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	if err := writable(dir); err != nil {
		return fmt.Errorf("directory %w", err)
	}
	return nil
}

// atRest reports whether path is a WAL database no process has open: its
// header says WAL and there is no -wal file. SQLite's read-only open of
// such a file still creates -wal and -shm (its readers share memory
// through -shm) and leaves them behind; opened immutable, it reads the
// file alone and creates nothing. That is exact here, since with no -wal
// every committed page is in the file. A database in rollback-journal
// mode (or an empty file) is read with mode=ro, which creates nothing.
func atRest(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("open database: %w", err)
	}
	defer f.Close()
	// https://www.sqlite.org/fileformat.html#the_database_header: bytes
	// 18 and 19 are 2 in WAL mode.
	hdr := make([]byte, 20)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return false, nil // shorter than a header: empty, or not SQLite (the open says)
	}
	return hdr[18] == 2 && hdr[19] == 2 && !exists(path+"-wal"), nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// inspectSQLiteFile reads the schema version and keys through a
// connection that cannot write: mode=ro (SQLITE_OPEN_READONLY, and a
// missing file is an error, not created) and query_only.
func inspectSQLiteFile(ctx context.Context, path string, immutable bool, in *Inspection) error {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "query_only(1)")
	q.Set("mode", "ro")
	if immutable {
		q.Set("immutable", "1")
	}
	// Built as OpenSQLite builds its name, so both open the same file.
	h, err := sql.Open("sqlite", sqliteURI(path, q))
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer h.Close()
	h.SetMaxOpenConns(1)
	return inspectSchema(ctx, h, sqliteDialect, in)
}

// InspectPostgres connects and reads the schema version and keys in a
// read-only transaction of a session whose every transaction is read-only
// (default_transaction_read_only), so nothing can be written, migrations
// least of all. A database without authsidecar's tables is fine (Exists
// false) unless serve could not create them: tables of the same names
// already there, or no CREATE privilege on the schema.
func InspectPostgres(ctx context.Context, o PostgresOptions) (Inspection, error) {
	var in Inspection
	ms, err := postgresDialect.list()
	if err != nil {
		return in, err
	}
	in.Known = len(ms)
	cc, where, err := postgresConfig(o)
	if err != nil {
		return in, err
	}
	in.Where = where
	cc.RuntimeParams["default_transaction_read_only"] = "on"
	h := stdlib.OpenDB(*cc)
	defer h.Close()
	h.SetMaxOpenConns(1)
	if err := h.PingContext(ctx); err != nil {
		return in, fmt.Errorf("connect to %s: %w", where, redactErr(err, o.URL))
	}
	return in, errlist.Prefix(where, redactErr(inspectSchema(ctx, h, postgresDialect, &in), o.URL))
}

// inspectSchema reads the schema version and, when the schema has them,
// the keys, in one read-only transaction.
func inspectSchema(ctx context.Context, h *sql.DB, dl *dialect, in *Inspection) error {
	t, err := h.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer t.Rollback()
	in.Exists, in.Version, err = dl.schemaVersion(ctx, t, in.Exists)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if err := tooNew(in.Version, in.Known); err != nil {
		return err
	}
	if !in.Exists || in.Version == 0 {
		return dl.canMigrate(ctx, t)
	}
	rows, err := t.QueryContext(ctx, keysQuery)
	if err != nil {
		return fmt.Errorf("select keys: %w", err)
	}
	defer rows.Close()
	in.Keys = []issuer.KeyRecord{}
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return fmt.Errorf("scan key: %w", err)
		}
		in.Keys = append(in.Keys, k)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("select keys: %w", err)
	}
	return nil
}

// sqliteSchemaVersion is PRAGMA user_version, as migrateSQLite keeps it.
// Whether the database exists is the file's business, decided before.
func sqliteSchemaVersion(ctx context.Context, t *sql.Tx, fileExists bool) (bool, int, error) {
	var v int
	err := t.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v)
	return fileExists, v, err
}

// postgresSchemaVersion reads schema_migrations, the table migratePostgres
// creates first; a database without it has never been opened by serve.
func postgresSchemaVersion(ctx context.Context, t *sql.Tx, _ bool) (bool, int, error) {
	var found bool
	if err := t.QueryRowContext(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&found); err != nil || !found {
		return false, 0, err
	}
	var v int
	err := t.QueryRowContext(ctx, `SELECT COALESCE(max(version), 0) FROM schema_migrations`).Scan(&v)
	return true, v, err
}

// postgresCanMigrate reports what would make serve's first migration fail
// on a database without the schema: tables of authsidecar's names there
// already (Better Auth's own, say), or a role that may not create tables
// in the schema the search_path picks.
func postgresCanMigrate(ctx context.Context, t *sql.Tx) error {
	var schema sql.NullString
	var create sql.NullBool
	if err := t.QueryRowContext(ctx, `SELECT current_schema(), has_schema_privilege(current_schema(), 'CREATE')`).Scan(&schema, &create); err != nil {
		return fmt.Errorf("read privileges: %w", err)
	}
	if !schema.Valid {
		return errors.New("no schema on the search_path exists: serve could not create its tables")
	}
	var taken []string
	for _, name := range append([]string{"rate_limit"}, tables...) {
		var found bool
		if err := t.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, `"`+name+`"`).Scan(&found); err != nil {
			return fmt.Errorf("look for table %s: %w", name, err)
		}
		if found {
			taken = append(taken, name)
		}
	}
	var probs []error
	if len(taken) > 0 {
		probs = append(probs, fmt.Errorf("no schema_migrations table, but tables named like authsidecar's exist in schema %s (%s): serve's first migration would fail on them; give authsidecar a database of its own", schema.String, strings.Join(taken, ", ")))
	}
	if !create.Bool {
		probs = append(probs, fmt.Errorf("the role may not create tables in schema %s: serve could not create its tables (GRANT CREATE ON SCHEMA %s TO the role)", schema.String, schema.String))
	}
	return errors.Join(probs...)
}
