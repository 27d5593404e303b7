package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/sqlstore"
)

// TestDBBackup backs up the database of a running sidecar and opens the
// copy.
func TestDBBackup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath, port := writeConfig(t, dir, "")
	s := startSidecar(t, cfgPath, port, e2eSecret)
	signUp(t, s, "ann@example.com", "correct-horse-battery")

	file := filepath.Join(dir, "backup.db")
	out := mustCLI(t, "", "", argv(cfgPath, "db backup", file)...)
	if !strings.Contains(out, "backed up "+filepath.Join(dir, "auth.db")+" to "+file) {
		t.Errorf("db backup: got %q, want it to name both files", out)
	}
	info, err := os.Stat(file)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: got %v %v, want mode 0600", info, err)
	}
	before, _ := os.ReadFile(file)
	if _, _, err := cli(t, "", "", argv(cfgPath, "db backup", file)...); err == nil || !strings.Contains(err.Error(), "already exists: refusing to overwrite it") {
		t.Errorf("backup over an existing file: got %v, want a refusal", err)
	}
	if after, _ := os.ReadFile(file); string(after) != string(before) {
		t.Error("a refused backup changed the existing file")
	}

	ctx := context.Background()
	emails := func(path string) string {
		t.Helper()
		db, err := sqlstore.OpenSQLite(ctx, path)
		if err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
		defer db.Close()
		users, err := db.Users(ctx, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, u := range users {
			out = append(out, u.ID+" "+u.Email)
		}
		if n, err := db.Count(ctx, "jwks"); err != nil || n != 1 {
			t.Errorf("%s: got %d keys %v, want 1", path, n, err)
		}
		return strings.Join(out, ",")
	}
	live, copied := emails(filepath.Join(dir, "auth.db")), emails(file)
	if copied != live || !strings.Contains(copied, "ann@example.com") {
		t.Errorf("backup users: got %q, want %q", copied, live)
	}
}
