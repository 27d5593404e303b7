package pgtest_test

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/authsidecar/authsidecar/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func open(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestURLGivesSeparateDatabases: two calls, two empty databases.
func TestURLGivesSeparateDatabases(t *testing.T) {
	a, b := pgtest.URL(t), pgtest.URL(t)
	if a == b {
		t.Fatalf("got the same URL twice: %s", a)
	}
	if _, err := open(t, a).Exec(`CREATE TABLE only_in_a (x int)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := open(t, b).QueryRow(`SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("got %d tables named only_in_a in the other database (%v), want 0", n, err)
	}
}

// TestStartStopStart: a private cluster goes away and comes back on the
// same port with its data.
func TestStartStopStart(t *testing.T) {
	c := pgtest.Start(t)
	db := open(t, c.URL())
	if _, err := db.Exec(`CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3e9)
	defer cancel()
	if err := db.PingContext(ctx); err == nil {
		t.Fatal("ping with the server stopped: got nil, want an error")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var x int
	if err := db.QueryRow(`SELECT x FROM kept`).Scan(&x); err != nil || x != 42 {
		t.Fatalf("after restart: got %d %v, want 42", x, err)
	}
}
