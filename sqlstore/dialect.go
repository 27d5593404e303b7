package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// dialect is everything that differs between the engines. The queries
// themselves are shared: they are written with "?" placeholders, quote
// "user" (a reserved word in PostgreSQL), store instants as Unix
// milliseconds and use only SQL both engines accept (ON CONFLICT included).
type dialect struct {
	name string
	// rebind turns "?" placeholders into the engine's syntax.
	rebind func(string) string
	// forUpdate ends a SELECT of a row the transaction is about to write,
	// so two transactions cannot both read the old value. SQLite needs
	// nothing: its write transactions (BEGIN IMMEDIATE) are serialized.
	forUpdate string
	// skipLocked ends a SELECT of rows to claim or sweep: rows another
	// transaction holds are passed over instead of waited for, so
	// replicas claiming outbox rows at once each get different ones, and
	// a sweep never waits on (or deadlocks with) a request. SQLite needs
	// nothing: its write transactions are serialized, so no row is ever
	// held by another writer.
	skipLocked string
	// lockRevocations is run before a transaction inserts revocations, so
	// their ids become visible in order (revocations.go). SQLite needs
	// nothing: its writers are serialized.
	lockRevocations string
	// fleetLocks: replicas share the database, and work one of them
	// should do at a time (the sweep) takes an advisory lock. SQLite
	// needs none: one process owns the file.
	fleetLocks bool
	// sweepBatch is the rows one sweep delete takes. SQLite's is small: a
	// batch holds the one writer, so sign-ins queue behind it, and runs
	// as Go code in this process, on one of its CPUs; 100 rows take about
	// a millisecond. PostgreSQL deletes in the server, locking only the
	// rows it deletes; 500 rows take a few milliseconds of its CPU (1000
	// put get-session's p99 at up to 1.97x of its own on a loaded 2-CPU
	// machine, 500 at 0.8 to 1.2x: docs/benchmarks.md).
	sweepBatch int
	// resetRevocationIDs moves the id sequence past the ids an import
	// wrote. SQLite's AUTOINCREMENT follows explicit ids by itself.
	resetRevocationIDs string
	// emailTaken reports an insert refused by the UNIQUE constraint on
	// "user".email, and no other: a duplicate id (a broken db copy) must
	// not read as "email already registered".
	emailTaken func(error) bool
	// userIDTaken reports an insert refused by "user"'s primary key: a
	// user id given from outside (lazy migration) that exists.
	userIDTaken func(error) bool
	// accountTaken reports an insert refused by the UNIQUE constraint on
	// account (provider_id, account_id): the provider identity is linked.
	accountTaken func(error) bool
	// snapshotIsolation makes a read transaction see one snapshot (Export).
	// SQLite's read transactions under WAL always do.
	snapshotIsolation sql.IsolationLevel
	// migrations is the directory of the engine's embedded migrations.
	migrations string
	// schemaVersion reads, in a read-only transaction, whether the schema
	// exists and its version, as migrate keeps them; exists is what the
	// caller knows already (SQLite: the file exists). Inspect only.
	schemaVersion func(ctx context.Context, t *sql.Tx, exists bool) (bool, int, error)
	// canMigrate reports what would make serve's first migration fail on
	// a database without the schema. Inspect only.
	canMigrate func(ctx context.Context, t *sql.Tx) error
}

var sqliteDialect = &dialect{
	name:       "sqlite",
	rebind:     func(q string) string { return q },
	sweepBatch: 100,
	// modernc reports "constraint failed: UNIQUE constraint failed:
	// user.email (2067)"; the message is stable across versions.
	emailTaken: func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed: user.email")
	},
	userIDTaken: func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed: user.id")
	},
	accountTaken: func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed: account.provider_id, account.account_id")
	},
	migrations:    "migrations/sqlite",
	schemaVersion: sqliteSchemaVersion,
	// What the file system must allow is checked before SQL is reached.
	canMigrate: func(context.Context, *sql.Tx) error { return nil },
}

var postgresDialect = &dialect{
	name:               "postgres",
	rebind:             dollarPlaceholders,
	forUpdate:          " FOR UPDATE",
	skipLocked:         " FOR UPDATE SKIP LOCKED",
	lockRevocations:    fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", lockRevocations),
	fleetLocks:         true,
	sweepBatch:         500,
	resetRevocationIDs: `SELECT setval(pg_get_serial_sequence('revocation', 'id'), (SELECT max(id) FROM revocation))`,
	snapshotIsolation:  sql.LevelRepeatableRead,
	// SQLSTATE 23505 on the constraint migrations/postgres/0001 names by
	// default, never the message text, which is localized.
	emailTaken: func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "user_email_key"
	},
	userIDTaken: func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "user_pkey"
	},
	accountTaken: func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "account_provider_id_account_id_key"
	},
	migrations:    "migrations/postgres",
	schemaVersion: postgresSchemaVersion,
	canMigrate:    postgresCanMigrate,
}

// dollarPlaceholders numbers the "?" placeholders $1, $2, ... The shared
// queries hold no "?" inside string literals or identifiers.
func dollarPlaceholders(q string) string {
	if strings.IndexByte(q, '?') < 0 {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// Advisory lock keys (PostgreSQL): one for migrations, one for creating the
// first signing key, so replicas starting together on an empty database
// neither race through the schema nor each create a key.
const (
	lockMigrate int64 = 0x6175_7468_7364_0001 // "authsd" 1
	lockKeys    int64 = 0x6175_7468_7364_0002
	// lockRevocations is held by a transaction from its insert of
	// revocations to its end (pg_advisory_xact_lock).
	lockRevocations int64 = 0x6175_7468_7364_0003
	// lockSweep is held by the replica whose Sweeper is running, for the
	// run (pg_try_advisory_lock): the others skip theirs.
	lockSweep int64 = 0x6175_7468_7364_0004
)
