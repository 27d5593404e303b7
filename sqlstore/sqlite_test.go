package sqlstore_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/mail"
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

// TestSQLiteStoresNoTokenInPlainText: a reset or verification token never
// reaches the database file or its WAL, in any encoding a link could
// carry; only its SHA-256 does, which the test finds, so it does see
// what is stored.
func TestSQLiteStoresNoTokenInPlainText(t *testing.T) {
	db, path := MustOpenDB(t)
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	var tokens []issued
	for _, kind := range []mail.Kind{mail.PasswordReset, mail.EmailVerification} {
		tokens = append(tokens, issueToken(t, db, kind, "u1", "ann@example.com", t0, time.Hour))
	}
	files := func() []byte {
		var all []byte
		for _, p := range []string{path, path + "-wal"} {
			b, err := os.ReadFile(p)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		return all
	}
	check := func(when string) {
		t.Helper()
		stored := files()
		for _, is := range tokens {
			raw, err := base64.RawURLEncoding.DecodeString(is.text)
			if err != nil {
				t.Fatal(err)
			}
			for _, form := range []string{is.text, string(raw), hex.EncodeToString(raw), base64.StdEncoding.EncodeToString(raw), base64.URLEncoding.EncodeToString(raw)} {
				if bytes.Contains(stored, []byte(form)) {
					t.Errorf("%s: the %s token is in the database files (as %q)", when, is.tok.Kind, form)
				}
			}
			if !bytes.Contains(stored, is.tok.Hash[:]) {
				t.Errorf("%s: the %s token's hash is not in the database files: the test reads the wrong files", when, is.tok.Kind)
			}
		}
	}
	check("open")
	// Closing checkpoints the WAL into the file.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	check("closed")
}

// TestSQLitePayloadGoneFromFile: an outbox payload (a sealed link) is in
// the file while the message is pending, and gone from it, not just
// unlinked, once the message is acknowledged or dead (secure_delete).
func TestSQLitePayloadGoneFromFile(t *testing.T) {
	ctx := context.Background()
	for _, dead := range []bool{false, true} {
		db, path := MustOpenDB(t)
		mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
		is := issueToken(t, db, mail.PasswordReset, "u1", "ann@example.com", t0, time.Hour)
		walAndFile := func() []byte {
			var all []byte
			for _, p := range []string{path, path + "-wal"} {
				b, _ := os.ReadFile(p)
				all = append(all, b...)
			}
			return all
		}
		if !bytes.Contains(walAndFile(), is.msg.Sealed) {
			t.Fatal("the pending payload is not in the database files: the test reads the wrong files")
		}
		mustClaim(t, db, "w", 1, time.Minute, t0)
		var err error
		if dead {
			err = db.FailOutbox(ctx, is.msg.ID, "w", t0, "550", true, t0)
		} else {
			err = db.AckOutbox(ctx, is.msg.ID, "w", t0)
		}
		if err != nil {
			t.Fatal(err)
		}
		// Closing checkpoints the WAL into the file and removes it.
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// Any 16 bytes of it: a freed cell keeps most of its bytes
		// even where SQLite wrote a free-block header over its start.
		for i := 0; i+16 <= len(is.msg.Sealed); i += 16 {
			if bytes.Contains(b, is.msg.Sealed[i:i+16]) {
				t.Errorf("dead %v: bytes %d-%d of the payload are still in the file after the message finished", dead, i, i+16)
			}
		}
	}
}
