package sqlstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/passhash"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// testCreateSessionRehashed: a sign-in's session and the upgrade of its
// foreign hash commit together, the upgrade only while the hash is the
// one the sign-in verified; racing sign-ins all get their session and
// exactly one swaps the hash.
func testCreateSessionRehashed(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	u, _ := newUser("u1", "ann@example.com", t0)
	if err := db.CreateUser(ctx, u, "$2y$10$old", issuer.Session{}); err != nil {
		t.Fatal(err)
	}
	session := func(i int) issuer.Session {
		_, s := newUser("u1", "", t0.Add(time.Duration(i)*time.Minute))
		s.ID, s.Token = fmt.Sprintf("s%d", i), fmt.Sprintf("t%d", i)
		return s
	}
	hash := func(id string) string {
		t.Helper()
		h, err := db.PasswordHash(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if replaced, err := db.CreateSessionRehashed(ctx, session(1), "$2y$10$old", "salt:new"); err != nil || !replaced {
		t.Fatalf("first sign-in: got replaced %t, %v; want true, nil", replaced, err)
	}
	if got := hash("u1"); got != "salt:new" {
		t.Errorf("after the first sign-in: got hash %q, want salt:new", got)
	}
	// The second sign-in verified the foreign hash before the first
	// replaced it: it gets its session, the hash stays.
	if replaced, err := db.CreateSessionRehashed(ctx, session(2), "$2y$10$old", "salt:other"); err != nil || replaced {
		t.Fatalf("second sign-in: got replaced %t, %v; want false, nil", replaced, err)
	}
	if got := hash("u1"); got != "salt:new" {
		t.Errorf("after the second sign-in: got hash %q, want salt:new", got)
	}
	for _, tok := range []string{"t1", "t2"} {
		if _, _, err := db.SessionByToken(ctx, tok); err != nil {
			t.Errorf("session %s: %v", tok, err)
		}
	}
	// A session that cannot be stored (its id is taken) takes the
	// upgrade back with it.
	if err := db.SetPassword(ctx, "u1", "$2y$10$again", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateSessionRehashed(ctx, session(1), "$2y$10$again", "salt:lost"); err == nil {
		t.Fatal("a session with a taken id: got no error")
	}
	if got := hash("u1"); got != "$2y$10$again" {
		t.Errorf("after a failed session insert: got hash %q, want the old one", got)
	}

	// Concurrent sign-ins with the same foreign hash.
	u2, _ := newUser("u2", "bob@example.com", t0)
	if err := db.CreateUser(ctx, u2, "$P$Bold", issuer.Session{}); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	replaced := make([]bool, n)
	for i := range n {
		wg.Go(func() {
			s := session(100 + i)
			s.UserID = "u2"
			var err error
			if replaced[i], err = db.CreateSessionRehashed(ctx, s, "$P$Bold", fmt.Sprintf("salt:%d", i)); err != nil {
				t.Errorf("sign-in %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	winners := 0
	for i, r := range replaced {
		if r {
			winners++
			if got, want := hash("u2"), fmt.Sprintf("salt:%d", i); got != want {
				t.Errorf("got hash %q, want %q (the one sign-in that replaced it)", got, want)
			}
		}
	}
	if winners != 1 {
		t.Errorf("%d sign-ins replaced the hash, want 1", winners)
	}
	if sessions, err := db.Sessions(ctx, "u2", t0); err != nil || len(sessions) != n {
		t.Errorf("got %d sessions (%v), want %d", len(sessions), err, n)
	}
}

// testPasswordFormats: the SQL that counts credentials by format names
// each of passhash's test vectors as passhash.Parse does.
func testPasswordFormats(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	files, err := filepath.Glob(filepath.Join("..", "passhash", "testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("passhash's vectors: %v", err)
	}
	want := map[string]int64{}
	i := 0
	add := func(stored, format string) {
		t.Helper()
		i++
		u, _ := newUser(fmt.Sprintf("u%d", i), fmt.Sprintf("u%d@example.com", i), t0)
		if err := db.CreateUser(ctx, u, stored, issuer.Session{}); err != nil {
			t.Fatal(err)
		}
		want[format]++
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var f struct{ Vectors []struct{ Hash string } }
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		for _, v := range f.Vectors {
			h, err := passhash.Parse(v.Hash, passhash.Options{AllowWeak: true})
			if err != nil {
				t.Fatal(err)
			}
			add(v.Hash, string(h.Format()))
		}
	}
	for _, s := range []string{"$1$md5crypt$x", "$argon2d$v=19$x", "garbage", "{SSHA}abc", "a$b"} {
		add(s, "other")
	}
	got, err := db.PasswordFormats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
