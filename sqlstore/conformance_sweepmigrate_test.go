package sqlstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/sqlstore"
)

// testMigrateSweepOnExisting: a database made by a binary before the
// sweep (schema 5, sessions in it, expired and live) is migrated by
// opening it: the session index the sweep reads appears, nothing stored
// changes, and the sweep then takes the expired session. The same holds
// when an operator created the index by hand first (CREATE INDEX
// CONCURRENTLY on a large PostgreSQL table, docs/operations.md).
func testMigrateSweepOnExisting(t *testing.T, _ *sqlstore.DB, e env) {
	for _, byHand := range []bool{false, true} {
		d := e.self.fresh(t)
		raw := d.raw(t)
		exec := func(q string, args ...any) {
			t.Helper()
			if _, err := raw.Exec(q, args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		files := migrationFiles(t, e.self.name)[:5]
		for i, f := range files {
			body, err := os.ReadFile(filepath.Join("migrations", e.self.name, f))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := raw.Exec(string(body)); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if e.self.name == "postgres" {
				if i == 0 {
					exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`)
				}
				exec(`INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, i+1, f)
			}
		}
		if e.self.name == "sqlite" {
			exec(`PRAGMA user_version = 5`)
		}
		// The rows a schema-5 binary wrote: times in Unix ms.
		ph := func(q string) string { return rawQuery(e, q) }
		exec(ph(`INSERT INTO "user" (id, name, email, created_at, updated_at) VALUES ('u1', 'Ann', 'ann@example.com', ?, ?)`), t0.UnixMilli(), t0.UnixMilli())
		for id, exp := range map[string]time.Time{"old": t0, "live": t0.Add(48 * time.Hour)} {
			exec(ph(`INSERT INTO session (id, token, user_id, expires_at, created_at, updated_at) VALUES (?, ?, 'u1', ?, ?, ?)`),
				id, "tok-"+id, exp.UnixMilli(), t0.UnixMilli(), t0.UnixMilli())
		}
		if byHand {
			exec(`CREATE INDEX session_expires_at ON session (expires_at)`)
		}

		db := d.mustOpen(t)
		if got, want := len(schemaVersions(t, e.self.name, d)), len(migrationFiles(t, e.self.name)); got != want {
			t.Errorf("index made by hand %v: got schema version %d, want %d", byHand, got, want)
		}
		q := `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'session_expires_at'`
		if e.self.name == "postgres" {
			q = `SELECT count(*) FROM pg_indexes WHERE tablename = 'session' AND indexname = 'session_expires_at'`
		}
		var n int
		if err := raw.QueryRow(q).Scan(&n); err != nil || n != 1 {
			t.Errorf("index made by hand %v: got %d indexes session_expires_at (%v), want 1", byHand, n, err)
		}
		wantCounts(t, db, map[string]int{"user": 1, "session": 2})
		res, err := sweeper(t, db, t0.Add(time.Hour), 0, 0, nil, nil).Sweep(context.Background())
		if err != nil || res.Removed[sqlstore.SweepSessions] != 1 {
			t.Errorf("sweep after the migration: got %v %v, want the expired session removed", res.Removed, err)
		}
		if got := sessionIDs(t, db); len(got) != 1 || got[0] != "live" {
			t.Errorf("sessions after the sweep: got %v, want [live]", got)
		}
	}
}
