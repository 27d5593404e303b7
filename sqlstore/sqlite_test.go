package sqlstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// MustOpenDB opens a fresh database file in a temp dir.
func MustOpenDB(tb testing.TB) (*sqlstore.DB, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "test.db")
	db, err := sqlstore.OpenSQLite(context.Background(), path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db, path
}

func TestOpenMigratesOnceAndRestrictsMode(t *testing.T) {
	db, path := MustOpenDB(t)
	ctx := context.Background()
	if err := db.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("got mode %v (%v), want 0600", info.Mode().Perm(), err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	u := issuer.User{ID: "u1", Name: "N", Email: "n@example.com", CreatedAt: now, UpdatedAt: now}
	s := issuer.Session{ID: "s1", Token: "t1", UserID: "u1", ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now, Remember: true}
	if err := db.CreateUser(ctx, u, "salt:hash", s); err != nil {
		t.Fatal(err)
	}
	db.Close()

	// Reopening runs no migration twice and keeps the data.
	db2, err := sqlstore.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db2.Close()
	gotS, gotU, err := db2.SessionByToken(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if gotU.Email != u.Email || !gotS.ExpiresAt.Equal(s.ExpiresAt) || !gotS.Remember || gotU.Image != nil {
		t.Errorf("got %+v %+v, want what was stored", gotS, gotU)
	}
	// A second user with the same email is refused and leaves nothing behind.
	u2 := u
	u2.ID = "u2"
	s2 := s
	s2.ID, s2.Token, s2.UserID = "s2", "t2", "u2"
	if err := db2.CreateUser(ctx, u2, "x:y", s2); !errors.Is(err, issuer.ErrEmailTaken) {
		t.Fatalf("duplicate email: got %v, want ErrEmailTaken", err)
	}
	for table, want := range map[string]int{"user": 1, "account": 1, "session": 1} {
		if n, _ := db2.Count(ctx, table); n != want {
			t.Errorf("%s: got %d rows, want %d", table, n, want)
		}
	}
	if _, err := db2.Count(ctx, "user; DROP TABLE user"); err == nil {
		t.Error("Count accepted an arbitrary table name")
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	db, path := MustOpenDB(t)
	db.Close()
	raw, err := sqlstore.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.SetUserVersionForTest(context.Background(), 99); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	_, err = sqlstore.OpenSQLite(context.Background(), path)
	if err == nil || !strings.Contains(err.Error(), "newer than this binary") {
		t.Fatalf("got %v, want a refusal to run on a newer schema", err)
	}
}

func TestOpenFailsClearly(t *testing.T) {
	_, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "missing-dir", "x.db"))
	if err == nil || !strings.Contains(err.Error(), "open database") {
		t.Fatalf("got %v, want an open database error", err)
	}
}
