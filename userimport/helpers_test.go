package userimport_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/sqlstore"
	"github.com/authsidecar/authsidecar/userimport"
)

// t0 is the tests' clock: lines without created_at get it.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// openStore opens a fresh SQLite database in a temp dir.
func openStore(t testing.TB) *sqlstore.DB {
	t.Helper()
	db, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "auth.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// result is one Run: its summary, error and refused lines as
// "line N: reason".
type result struct {
	sum     userimport.Summary
	err     error
	refused []string
}

func (r result) String() string {
	return fmt.Sprintf("%+v err=%v refused=%q", r.sum.Counts, r.err, r.refused)
}

// importText runs an import of text into st.
func importText(t testing.TB, st userimport.Store, text string, o userimport.Options) result {
	t.Helper()
	var r result
	o.Refused = func(line int, reason string) { r.refused = append(r.refused, fmt.Sprintf("line %d: %s", line, reason)) }
	o.Now = func() time.Time { return t0 }
	r.sum, r.err = userimport.Run(context.Background(), strings.NewReader(text), st, o)
	return r
}

// lines joins JSON Lines.
func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// store reads back what an import wrote.
type store struct{ db *sqlstore.DB }

func (s *store) wantUser(t *testing.T, id, email, name string, verified bool) {
	t.Helper()
	u, err := s.db.UserByID(context.Background(), id)
	if err != nil {
		t.Errorf("user %s: %v", id, err)
		return
	}
	if u.Email != email || u.Name != name || u.EmailVerified != verified || u.EmailUnclaimed {
		t.Errorf("user %s: got %q %q verified %t unclaimed %t, want %q %q verified %t, claimed", id, u.Email, u.Name, u.EmailVerified, u.EmailUnclaimed, email, name, verified)
	}
}
func (s *store) wantRoles(t *testing.T, userID string, roles ...string) {
	t.Helper()
	snap, err := s.db.Export(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, g := range snap.Roles {
		held[g.Role] = held[g.Role] || g.UserID == userID
	}
	for _, r := range roles {
		if !held[r] {
			t.Errorf("user %s: role %s not granted", userID, r)
		}
		delete(held, r)
	}
	for r, ok := range held {
		if ok {
			t.Errorf("user %s: role %s granted, not in the file", userID, r)
		}
	}
}
