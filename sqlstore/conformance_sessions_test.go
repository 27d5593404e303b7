package sqlstore_test

import (
	"context"
	"errors"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// testSessions: create, look up (with the user, in one query), extend and
// delete sessions.
func testSessions(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	u, first := newUser("u1", "ann@example.com", t0)
	if err := db.CreateUser(ctx, u, "h", first); err != nil {
		t.Fatal(err)
	}
	// rememberMe:false, no IP or user agent.
	s := issuer.Session{ID: "s2", Token: "tok-2", UserID: "u1", ExpiresAt: t0.Add(24 * time.Hour),
		CreatedAt: t0.Add(time.Minute), UpdatedAt: t0.Add(time.Minute), Remember: false}
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	gotS, gotU, err := db.SessionByToken(ctx, "tok-2")
	if err != nil || !reflect.DeepEqual(gotS, s) || !reflect.DeepEqual(gotU, u) {
		t.Fatalf("SessionByToken: got %+v %+v %v, want %+v %+v", gotS, gotU, err, s, u)
	}
	for _, token := range []string{"nope", "", "TOK-2", "s2"} {
		if _, _, err := db.SessionByToken(ctx, token); !errors.Is(err, issuer.ErrNotFound) {
			t.Errorf("SessionByToken(%q): got %v, want ErrNotFound", token, err)
		}
	}
	// A session of an unknown user is refused (foreign key on both engines).
	orphan := issuer.Session{ID: "s3", Token: "tok-3", UserID: "nobody", ExpiresAt: t0, CreatedAt: t0, UpdatedAt: t0}
	if err := db.CreateSession(ctx, orphan); err == nil {
		t.Error("CreateSession for an unknown user: got nil, want an error")
	}
	// A taken token is refused.
	dup := s
	dup.ID = "s4"
	if err := db.CreateSession(ctx, dup); err == nil {
		t.Error("CreateSession with a taken token: got nil, want an error")
	}
	wantCounts(t, db, map[string]int{"session": 2})

	// ExtendSession moves the expiry and updated_at, nothing else.
	exp, now := t0.Add(48*time.Hour), t0.Add(2*time.Hour)
	if err := db.ExtendSession(ctx, "s2", exp, now); err != nil {
		t.Fatal(err)
	}
	want := s
	want.ExpiresAt, want.UpdatedAt = exp, now
	if gotS, _, err := db.SessionByToken(ctx, "tok-2"); err != nil || !reflect.DeepEqual(gotS, want) {
		t.Errorf("after ExtendSession: got %+v %v, want %+v", gotS, err, want)
	}
	if gotS, _, _ := db.SessionByToken(ctx, first.Token); !reflect.DeepEqual(gotS, first) {
		t.Errorf("ExtendSession touched another session: got %+v, want %+v", gotS, first)
	}

	// DeleteSession: deleting nothing is no error.
	if err := db.DeleteSession(ctx, "nope"); err != nil {
		t.Errorf("DeleteSession(unknown): got %v, want nil", err)
	}
	if err := db.DeleteSession(ctx, "tok-2"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.SessionByToken(ctx, "tok-2"); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("deleted session: got %v, want ErrNotFound", err)
	}
	if err := db.DeleteSession(ctx, "tok-2"); err != nil {
		t.Errorf("DeleteSession twice: got %v, want nil", err)
	}
	if _, _, err := db.SessionByToken(ctx, first.Token); err != nil {
		t.Errorf("DeleteSession deleted another session: %v", err)
	}
	wantCounts(t, db, map[string]int{"user": 1, "session": 1})
}

// testEndSessions: a user's other sessions go; its kept one and other
// users' stay; with cutoff false each session deleted is revoked, with
// cutoff true the user is, even when no session was left to delete.
func testEndSessions(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	mustCreateUser(t, db, "u2", "bob@example.com", t0, t0.Add(time.Hour))
	for _, s := range []issuer.Session{
		{ID: "a2", Token: "ta2", UserID: "u1", ExpiresAt: t0, CreatedAt: t0, UpdatedAt: t0},
		{ID: "a3", Token: "ta3", UserID: "u1", ExpiresAt: t0, CreatedAt: t0, UpdatedAt: t0},
		{ID: "b2", Token: "tb2", UserID: "u2", ExpiresAt: t0, CreatedAt: t0, UpdatedAt: t0},
	} {
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name         string
		user, keep   string
		cutoff       bool
		wantSessions []string
		wantRevoked  []string // kind:subject, in id order
	}{
		{"keep one", "u1", "ta2", false, []string{"b2", "s-u2", "a2"}, []string{"session:a3", "session:s-u1"}},
		// keepToken belongs to someone else: every session of u2 goes, u1's
		// kept one stays.
		{"keep another user's", "u2", "ta2", false, []string{"a2"}, []string{"session:b2", "session:s-u2"}},
		{"unknown user", "nobody", "", false, []string{"a2"}, nil},
		// A cutoff also revokes each session it ends, whatever the issue
		// time of the JWTs minted from it (a get-session racing the commit).
		{"keep none, cutoff", "u1", "", true, nil, []string{"session:a2", "user:u1"}},
		{"nothing left, cutoff", "u2", "", true, nil, []string{"user:u2"}},
	}
	var after int64
	for _, st := range steps {
		if _, err := db.EndSessions(ctx, st.user, st.keep, st.cutoff, t0); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got, want := sessionIDs(t, db), sorted(st.wantSessions); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got sessions %q, want %q", st.name, got, want)
		}
		var got []string
		got, after = revokedSince(t, db, after)
		sort.Strings(got)
		if !reflect.DeepEqual(got, st.wantRevoked) {
			t.Errorf("%s: got revocations %q, want %q", st.name, got, st.wantRevoked)
		}
	}
}

func sessionIDs(t *testing.T, db *sqlstore.DB) []string {
	t.Helper()
	snap, err := db.Export(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range snap.Sessions {
		out = append(out, s.ID)
	}
	return sorted(out)
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}
