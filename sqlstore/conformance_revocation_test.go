package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/mail"
	"github.com/authsidecar/authsidecar/revocation"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// revokedSince reads the revocations after id as "kind:subject" strings,
// and the last id read.
func revokedSince(t *testing.T, db *sqlstore.DB, after int64) ([]string, int64) {
	t.Helper()
	recs, err := db.RevocationsSince(context.Background(), after, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		if r.ID <= after {
			t.Fatalf("RevocationsSince(%d) returned id %d", after, r.ID)
		}
		out = append(out, r.Kind.String()+":"+r.Subject)
		after = r.ID
	}
	return out, after
}

// testRevocationsWithTheirCause: every method that ends sessions or
// changes who may hold a JWT writes its revocation in its own
// transaction, hands it to OnRevoke once committed, and writes nothing
// when it fails.
func testRevocationsWithTheirCause(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	var hooked []string
	db.OnRevoke = func(rs []revocation.Record) {
		for _, r := range rs {
			hooked = append(hooked, r.Kind.String()+":"+r.Subject)
		}
	}
	for _, id := range []string{"u1", "u2", "u3", "u4", "u5", "u6"} {
		mustCreateUser(t, db, id, id+"@example.com", t0, t0.Add(time.Hour))
	}
	extra := issuer.Session{ID: "x1", Token: "tx1", UserID: "u1", ExpiresAt: t0.Add(time.Hour), CreatedAt: t0, UpdatedAt: t0}
	if err := db.CreateSession(ctx, extra); err != nil {
		t.Fatal(err)
	}
	reset := issueToken(t, db, mail.PasswordReset, "u4", "u4@example.com", t0, time.Hour)
	var after int64
	for _, step := range []struct {
		name string
		do   func() error
		want []string
	}{
		{"sign-out, JWTs kept", func() error { _, err := db.EndSession(ctx, "tx1", "", false, t0); return err }, nil},
		{"sign-out", func() error { _, err := db.EndSession(ctx, "t-u1", "", true, t0); return err }, []string{"session:s-u1"}},
		{"another user's session", func() error { _, err := db.EndSession(ctx, "t-u2", "u3", true, t0); return err }, nil},
		{"change password, sessions kept", func() error { return db.ChangePassword(ctx, "u2", "h2", "", false, t0) }, nil},
		{"change password, others revoked", func() error { return db.ChangePassword(ctx, "u2", "h2", "t-u2", true, t0) }, []string{"user:u2"}}, // u2 had no other session
		{"change password, no credential", func() error { return db.ChangePassword(ctx, "nobody", "h", "", true, t0) }, nil},
		{"reset password", func() error {
			_, _, err := db.ResetPassword(ctx, reset.tok.Hash, "h4", true, t0)
			return err
		}, []string{"session:s-u4", "user:u4"}},
		{"delete user", func() error { return db.DeleteUser(ctx, "u3", t0) }, []string{"session:s-u3", "user:u3"}},
		{"delete nobody", func() error { return db.DeleteUser(ctx, "u3", t0) }, nil},
		{"delete user by email", func() error { _, err := db.DeleteUserByEmail(ctx, "u5@example.com", t0); return err }, []string{"session:s-u5", "user:u5"}},
		{"operator revoke", func() error { _, _, err := db.RevokeUserByEmail(ctx, "u6@example.com", t0); return err }, []string{"session:s-u6", "user:u6"}},
		{"operator revoke, unknown", func() error { _, _, err := db.RevokeUserByEmail(ctx, "nobody@example.com", t0); return err }, nil},
		{"ban", func() error {
			_, _, err := db.BanUserByEmail(ctx, "u2@example.com", "spam", t0.Add(time.Hour), t0)
			return err
		}, []string{"session:s-u2", "user:u2"}},
		{"unban", func() error { _, _, err := db.UnbanUserByEmail(ctx, "u2@example.com", t0); return err }, nil},
		{"revoke all", func() error { return db.RevokeAll(ctx, t0) }, []string{"all:"}},
	} {
		hooked = nil
		err := step.do()
		if err != nil && !errors.Is(err, issuer.ErrNotFound) {
			t.Fatalf("%s: %v", step.name, err)
		}
		var got []string
		got, after = revokedSince(t, db, after)
		if !reflect.DeepEqual(got, step.want) || !reflect.DeepEqual(hooked, step.want) {
			t.Errorf("%s: stored %q and handed OnRevoke %q, want %q", step.name, got, hooked, step.want)
		}
	}
	// u2's session, kept through its change of password, ended with the
	// ban; every other one ended with its user's revocation.
	wantCounts(t, db, map[string]int{"session": 0})
}

// testBans: a ban is stored with its reason and end, ends the user's
// sessions, and reads back on every lookup; unban clears it.
func testBans(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	until := t0.Add(24 * time.Hour)
	u, n, err := db.BanUserByEmail(ctx, "ann@example.com", "spam", until, t0)
	want := issuer.Ban{Banned: true, Reason: "spam", Expires: until}
	if err != nil || n != 1 || u.Ban != want {
		t.Fatalf("BanUserByEmail: got %+v %d %v, want the ban and 1 session ended", u.Ban, n, err)
	}
	if !u.Ban.Active(t0) || u.Ban.Active(until) {
		t.Errorf("Active: got %v at the ban and %v at its end, want true then false", u.Ban.Active(t0), u.Ban.Active(until))
	}
	got, _, err := db.CredentialByEmail(ctx, "ann@example.com")
	if err != nil || got.Ban != want {
		t.Errorf("CredentialByEmail after the ban: got %+v %v", got.Ban, err)
	}
	// For good: no end, no reason.
	if u, _, err := db.BanUserByEmail(ctx, "ann@example.com", "", time.Time{}, t0); err != nil || u.Ban != (issuer.Ban{Banned: true}) {
		t.Errorf("ban for good: got %+v %v", u.Ban, err)
	}
	u, was, err := db.UnbanUserByEmail(ctx, "ann@example.com", t0)
	if err != nil || !was || u.Ban != (issuer.Ban{}) {
		t.Errorf("UnbanUserByEmail: got %+v %v %v, want no ban, was banned", u.Ban, was, err)
	}
	if _, was, err := db.UnbanUserByEmail(ctx, "ann@example.com", t0); err != nil || was {
		t.Errorf("UnbanUserByEmail again: got %v %v, want was false", was, err)
	}
	if _, _, err := db.BanUserByEmail(ctx, "nobody@example.com", "", time.Time{}, t0); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("ban of an unknown email: got %v, want ErrNotFound", err)
	}
}

// testRevocationsSinceAndSweep: ids increase, a read returns at most
// limit rows after the cursor, and a sweep deletes what is older than its
// cutoff without disturbing the ids that follow.
func testRevocationsSinceAndSweep(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	for i := range 5 {
		if err := db.RevokeAll(ctx, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := db.RevocationsSince(ctx, 1, 3)
	if err != nil || len(recs) != 3 || recs[0].ID != 2 || recs[2].ID != 4 || !recs[0].At.Equal(t0.Add(time.Hour)) {
		t.Fatalf("RevocationsSince(1, 3): got %+v %v, want ids 2 to 4", recs, err)
	}
	// Kept an hour: at t0+4h, those before t0+3h go.
	if res, err := sweeper(t, db, t0.Add(4*time.Hour), 0, time.Hour, nil, nil).Sweep(ctx); err != nil || res.Removed[sqlstore.SweepRevocations] != 3 {
		t.Fatalf("sweep: got %v %v, want 3 revocations removed", res.Removed, err)
	}
	if err := db.RevokeAll(ctx, t0); err != nil {
		t.Fatal(err)
	}
	recs, err = db.RevocationsSince(ctx, 0, 10)
	if err != nil || len(recs) != 3 || recs[0].ID != 4 || recs[2].ID != 6 {
		t.Errorf("after the sweep: got %+v %v, want ids 4, 5 and a new 6", recs, err)
	}
}

// testRevocationsConcurrentWriters hammers the table with writers on
// several handles (replicas) while a poller reads new ids as fast as it
// can; writers pause between their insert and their commit, so without
// the lock that orders ids a poller would pass over some. The poller must
// end up having read every revocation committed, each once.
func testRevocationsConcurrentWriters(t *testing.T, db *sqlstore.DB, e env) {
	restore := sqlstore.SlowRevocationCommitsForTest(jitter, false)
	defer restore()
	written, read := hammer(t, db, e)
	if len(written) < 50 {
		t.Fatalf("only %d revocations written: the hammer did not run", len(written))
	}
	var missed []string
	for s := range written {
		if read[s] != 1 {
			missed = append(missed, fmt.Sprintf("%s (read %d times)", s, read[s]))
		}
	}
	if len(missed) > 0 || len(read) != len(written) {
		t.Errorf("a poller reading %d revocations as they committed: missed or repeated %d of them (%d read): %v", len(written), len(missed), len(read), missed)
	}
	t.Logf("%d revocations from concurrent writers, each read once by a fast poller", len(written))
}

// jitter pauses a revocation's transaction between insert and commit for
// up to 3 ms.
func jitter() { time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond) }

// hammer runs 4 handles x 4 writers for 1.5 s against a poller on its
// own handle, then drains the poller; it returns the subjects written
// and how often the poller read each.
func hammer(t *testing.T, db *sqlstore.DB, e env) (written map[string]bool, read map[string]int) {
	ctx := context.Background()
	handles := []*sqlstore.DB{db, e.replica(t), e.replica(t), e.replica(t)}
	poller := e.replica(t)
	var mu sync.Mutex
	written, read = map[string]bool{}, map[string]int{}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := handles[w%len(handles)]
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				u, s := newUser(id, id+"@example.com", t0)
				if err := h.CreateUser(ctx, u, "h", s); err != nil {
					t.Error(err)
					return
				}
				if _, err := h.EndSession(ctx, s.Token, "", true, t0); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				written["session:"+s.ID] = true
				mu.Unlock()
			}
		}()
	}
	var cursor int64
	poll := func() {
		recs, err := poller.RevocationsSince(ctx, cursor, 500)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for _, r := range recs {
			read[r.Kind.String()+":"+r.Subject]++
			cursor = r.ID
		}
		mu.Unlock()
	}
	// 1.5 s, and on until 200 are written (a slow machine, -race), within
	// 30 s.
	enough := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(written) >= 200
	}
	start := time.Now()
	for time.Since(start) < 1500*time.Millisecond || (!enough() && time.Since(start) < 30*time.Second) {
		poll()
	}
	stop.Store(true)
	wg.Wait()
	for range 3 { // everything has committed: read to the end
		poll()
	}
	return written, read
}
