package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// mustCreateUser stores a user with one session expiring at sessionExp.
func mustCreateUser(t *testing.T, db *sqlstore.DB, id, email string, created, sessionExp time.Time) {
	t.Helper()
	u := issuer.User{ID: id, Name: "Name " + id, Email: email, CreatedAt: created, UpdatedAt: created}
	s := issuer.Session{ID: "s-" + id, Token: "t-" + id, UserID: id, ExpiresAt: sessionExp, CreatedAt: created, UpdatedAt: created, Remember: true}
	if err := db.CreateUser(context.Background(), u, "salt:hash", s); err != nil {
		t.Fatal(err)
	}
}

func TestUsersAndDelete(t *testing.T) {
	db, _ := MustOpenDB(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	mustCreateUser(t, db, "u1", "ann@example.com", now.Add(-2*time.Hour), now.Add(time.Hour))
	mustCreateUser(t, db, "u2", "bob@example.com", now.Add(-time.Hour), now.Add(-time.Minute)) // session expired
	if err := db.CreateSession(ctx, issuer.Session{ID: "s-u1b", Token: "t-u1b", UserID: "u1", ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GrantRoleByEmail(ctx, "ann@example.com", "admin", now); err != nil {
		t.Fatal(err)
	}

	users, err := db.Users(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range users {
		got = append(got, fmt.Sprintf("%s=%d", u.Email, u.LiveSessions))
	}
	if want := "ann@example.com=2 bob@example.com=0"; strings.Join(got, " ") != want {
		t.Errorf("Users: got %q, want %q (oldest first, live sessions only)", strings.Join(got, " "), want)
	}
	if u, err := db.UserByEmail(ctx, "bob@example.com"); err != nil || u.ID != "u2" || !u.CreatedAt.Equal(now.Add(-time.Hour)) {
		t.Errorf("UserByEmail: got %+v %v, want u2", u, err)
	}
	if _, err := db.UserByEmail(ctx, "nobody@example.com"); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("UserByEmail unknown: got %v, want ErrNotFound", err)
	}

	d, err := db.DeleteUserByEmail(ctx, "ann@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if d.User.ID != "u1" || d.Sessions != 2 || d.Roles != 1 {
		t.Errorf("DeleteUserByEmail: got %+v, want u1 with 2 sessions and 1 role", d)
	}
	// ON DELETE CASCADE took the account, sessions and roles.
	for table, want := range map[string]int{"user": 1, "account": 1, "session": 1, "user_role": 0} {
		if n, _ := db.Count(ctx, table); n != want {
			t.Errorf("after delete, %s: got %d rows, want %d", table, n, want)
		}
	}
	if _, _, err := db.SessionByToken(ctx, "t-u1"); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("deleted user's session: got %v, want ErrNotFound", err)
	}
	if _, err := db.DeleteUserByEmail(ctx, "ann@example.com"); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("deleting again: got %v, want ErrNotFound", err)
	}
}

func TestRoleGrants(t *testing.T) {
	db, _ := MustOpenDB(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	mustCreateUser(t, db, "u1", "ann@example.com", now, now.Add(time.Hour))
	mustCreateUser(t, db, "u2", "bob@example.com", now, now.Add(time.Hour))

	steps := []struct {
		name    string
		do      func() (bool, error)
		want    bool
		wantErr error
	}{
		{"grant", func() (bool, error) { return db.GrantRoleByEmail(ctx, "ann@example.com", "admin", now) }, true, nil},
		{"grant again", func() (bool, error) { return db.GrantRoleByEmail(ctx, "ann@example.com", "admin", now) }, false, nil},
		{"grant other", func() (bool, error) { return db.GrantRoleByEmail(ctx, "ann@example.com", "ops", now) }, true, nil},
		{"grant bob", func() (bool, error) { return db.GrantRoleByEmail(ctx, "bob@example.com", "ops", now) }, true, nil},
		{"grant unknown", func() (bool, error) { return db.GrantRoleByEmail(ctx, "nobody@example.com", "admin", now) }, false, issuer.ErrNotFound},
		{"revoke", func() (bool, error) { return db.RevokeRoleByEmail(ctx, "bob@example.com", "ops") }, true, nil},
		{"revoke again", func() (bool, error) { return db.RevokeRoleByEmail(ctx, "bob@example.com", "ops") }, false, nil},
		{"revoke unknown", func() (bool, error) { return db.RevokeRoleByEmail(ctx, "nobody@example.com", "ops") }, false, issuer.ErrNotFound},
	}
	for _, s := range steps {
		got, err := s.do()
		if got != s.want || !errors.Is(err, s.wantErr) {
			t.Errorf("%s: got %v %v, want %v %v", s.name, got, err, s.want, s.wantErr)
		}
	}
	if ok, _ := db.HasAnyRole(ctx, "u1", []string{"admin"}); !ok {
		t.Error("HasAnyRole after grant: got false, want true")
	}

	list := func(email string) string {
		t.Helper()
		grants, err := db.RoleGrants(ctx, email)
		if err != nil {
			t.Fatalf("RoleGrants(%q): %v", email, err)
		}
		var out []string
		for _, g := range grants {
			if !g.CreatedAt.Equal(now) {
				t.Errorf("%s %s: got created %v, want %v", g.Email, g.Role, g.CreatedAt, now)
			}
			out = append(out, g.Email+":"+g.Role)
		}
		return strings.Join(out, " ")
	}
	for email, want := range map[string]string{
		"":                "ann@example.com:admin ann@example.com:ops",
		"ann@example.com": "ann@example.com:admin ann@example.com:ops",
		"bob@example.com": "",
	} {
		if got := list(email); got != want {
			t.Errorf("RoleGrants(%q): got %q, want %q", email, got, want)
		}
	}
	if _, err := db.RoleGrants(ctx, "nobody@example.com"); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("RoleGrants unknown email: got %v, want ErrNotFound", err)
	}
}

func TestBackup(t *testing.T) {
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
