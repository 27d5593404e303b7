package sqlstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestSQLiteFileMode: the file holds password hashes and encrypted keys,
// so it is created readable by its owner only. (The rest of what Open does
// is in the conformance suite.)
func TestSQLiteFileMode(t *testing.T) {
	_, path := MustOpenDB(t)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("got mode %v, want 0600", info.Mode().Perm())
	}
}

func TestSQLiteRefusesNewerSchema(t *testing.T) {
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

func TestSQLiteOpenFailsClearly(t *testing.T) {
	_, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "missing-dir", "x.db"))
	if err == nil || !strings.Contains(err.Error(), "open database") {
		t.Fatalf("got %v, want an open database error", err)
	}
}

func TestSQLiteBackup(t *testing.T) {
	db, _ := MustOpenDB(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	mustCreateUser(t, db, "u1", "ann@example.com", now, now.Add(time.Hour))
	mustCreateUser(t, db, "u2", "bob@example.com", now, now.Add(time.Hour))

	dir := t.TempDir()
	path := filepath.Join(dir, "backup.db")
	if err := db.Backup(ctx, path); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: got %v %v, want mode 0600", info, err)
	}
	// Writes after the backup do not reach it.
	mustCreateUser(t, db, "u3", "cy@example.com", now, now.Add(time.Hour))

	copyDB, err := sqlstore.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatalf("open backup: %v", err)
	}
	defer copyDB.Close()
	users, err := copyDB.Users(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 2 || users[0].Email != "ann@example.com" || users[1].Email != "bob@example.com" || users[0].LiveSessions != 1 {
		t.Errorf("backup users: got %+v, want ann and bob with their sessions", users)
	}
	if _, hash, err := copyDB.CredentialByEmail(ctx, "bob@example.com"); err != nil || hash != "salt:hash" {
		t.Errorf("backup credential: got %q %v, want the stored hash", hash, err)
	}

	// An existing file is never overwritten, even an empty one.
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o644)
	for _, p := range []string{path, empty} {
		before, _ := os.ReadFile(p)
		if err := db.Backup(ctx, p); err == nil || !strings.Contains(err.Error(), "already exists") {
			t.Errorf("backup over %s: got %v, want a refusal", filepath.Base(p), err)
		}
		if after, _ := os.ReadFile(p); string(after) != string(before) {
			t.Errorf("backup over %s changed the file", filepath.Base(p))
		}
	}
	if err := db.Backup(ctx, filepath.Join(dir, "missing", "b.db")); err == nil {
		t.Error("backup into a missing directory: got nil, want an error")
	}
}
