package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// testHasAnyRole: true when the user holds at least one of the roles;
// granting a role twice is no error and stores it once.
func testHasAnyRole(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	mustCreateUser(t, db, "u2", "bob@example.com", t0, t0.Add(time.Hour))
	for range 2 {
		if err := db.GrantRole(ctx, "u1", "admin"); err != nil {
			t.Fatalf("GrantRole: %v", err)
		}
	}
	if err := db.GrantRole(ctx, "u2", "ops"); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, db, map[string]int{"user_role": 2})
	if err := db.GrantRole(ctx, "nobody", "admin"); err == nil {
		t.Error("GrantRole to an unknown user: got nil, want an error")
	}
	tests := []struct {
		user  string
		roles []string
		want  bool
	}{
		{"u1", []string{"admin"}, true},
		{"u1", []string{"ops", "admin"}, true},
		{"u1", []string{"a", "b", "c", "admin", "d"}, true},
		{"u1", []string{"ops"}, false},
		{"u1", []string{"ADMIN", "admin "}, false},
		{"u1", []string{}, false},
		{"u1", nil, false},
		{"u2", []string{"admin"}, false},
		{"u2", []string{"admin", "ops"}, true},
		{"nobody", []string{"admin", "ops"}, false},
	}
	for _, tt := range tests {
		if got, err := db.HasAnyRole(ctx, tt.user, tt.roles); err != nil || got != tt.want {
			t.Errorf("HasAnyRole(%s, %q): got %v %v, want %v", tt.user, tt.roles, got, err, tt.want)
		}
	}
}

func testUsersAndDelete(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	now := t0
	mustCreateUser(t, db, "u1", "ann@example.com", now.Add(-2*time.Hour), now.Add(time.Hour))
	mustCreateUser(t, db, "u2", "bob@example.com", now.Add(-time.Hour), now.Add(-time.Minute)) // session expired
	if err := db.CreateSession(ctx, issuer.Session{ID: "s-u1b", Token: "t-u1b", UserID: "u1", ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	// A session expiring exactly now is no longer live.
	if err := db.CreateSession(ctx, issuer.Session{ID: "s-u2b", Token: "t-u2b", UserID: "u2", ExpiresAt: now, CreatedAt: now, UpdatedAt: now}); err != nil {
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

	d, err := db.DeleteUserByEmail(ctx, "ann@example.com", t0)
	if err != nil {
		t.Fatal(err)
	}
	if d.User.ID != "u1" || d.Sessions != 2 || d.Roles != 1 {
		t.Errorf("DeleteUserByEmail: got %+v, want u1 with 2 sessions and 1 role", d)
	}
	// ON DELETE CASCADE took the account, sessions and roles.
	wantCounts(t, db, map[string]int{"user": 1, "account": 1, "session": 2, "user_role": 0})
	if _, _, err := db.SessionByToken(ctx, "t-u1"); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("deleted user's session: got %v, want ErrNotFound", err)
	}
	if _, err := db.DeleteUserByEmail(ctx, "ann@example.com", t0); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("deleting again: got %v, want ErrNotFound", err)
	}
	// The email is free again.
	mustCreateUser(t, db, "u3", "ann@example.com", now, now.Add(time.Hour))
}

func testRoleGrants(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	now := t0
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
	if ok, _ := db.HasAnyRole(ctx, "u2", []string{"ops"}); ok {
		t.Error("HasAnyRole after revoke: got true, want false")
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
	if grants, err := db.RoleGrants(ctx, "bob@example.com"); err != nil || grants == nil {
		t.Errorf("RoleGrants of a user without roles: got %#v %v, want an empty, non-nil list", grants, err)
	}
	if _, err := db.RoleGrants(ctx, "nobody@example.com"); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("RoleGrants unknown email: got %v, want ErrNotFound", err)
	}
}
