package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/mail"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// testVerifyEmailSignsIn: the session a verification grants is created in
// its transaction. A session that cannot be stored (here its token is
// already taken: a unique violation on both engines) fails the whole:
// the token stays unspent and the address unverified, so the link works
// once the cause is gone. No session asked for (nil), and an address
// verified before, create nothing.
func testVerifyEmailSignsIn(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	now := t0.Add(time.Minute)
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	taken := issuer.Session{ID: "s-taken", Token: "t-taken", UserID: "u1", ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}
	if err := db.CreateSession(ctx, taken); err != nil {
		t.Fatal(err)
	}
	v := issueToken(t, db, mail.EmailVerification, "u1", "ann@example.com", t0, time.Hour)

	clash := issuer.Session{ID: "s-new", Token: "t-taken", ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}
	if _, _, err := db.VerifyEmail(ctx, v.tok.Hash, now, &clash); err == nil {
		t.Fatal("a session that cannot be stored: got no error")
	}
	if u, err := db.UserByEmail(ctx, "ann@example.com"); err != nil || u.EmailVerified {
		t.Errorf("after the failed verification: got %+v %v, want unverified", u, err)
	}
	wantCounts(t, db, map[string]int{"recovery_token": 1, "session": 2}) // u1's first and taken

	ok := issuer.Session{ID: "s-new", Token: "t-new", UserID: "someone-else", ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now, IPAddress: "192.0.2.1", UserAgent: "UA", Remember: true}
	u, proof, err := db.VerifyEmail(ctx, v.tok.Hash, now, &ok)
	if err != nil || proof.WasVerified || !u.EmailVerified {
		t.Fatalf("the same link once the cause is gone: got %+v %v %v, want verified now", u, proof.WasVerified, err)
	}
	s, su, err := db.SessionByToken(ctx, "t-new")
	want := ok
	want.UserID = "u1"
	if err != nil || su.ID != "u1" || s != want {
		t.Errorf("session created with the verification: got %+v of %s, %v; want %+v", s, su.ID, err, want)
	}
	wantCounts(t, db, map[string]int{"recovery_token": 0, "session": 3})

	// No session asked for (sign-in after verification is off, or the
	// browser has a session already): nothing is added.
	mustCreateUser(t, db, "u2", "bob@example.com", t0, t0.Add(time.Hour))
	v2 := issueToken(t, db, mail.EmailVerification, "u2", "bob@example.com", t0, time.Hour)
	more := issuer.Session{ID: "s-more", Token: "t-more", ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}
	if _, proof, err := db.VerifyEmail(ctx, v2.tok.Hash, now, nil); err != nil || proof.WasVerified {
		t.Fatalf("without a session: got %v %v", proof.WasVerified, err)
	}
	// Verified before: nothing is added either.
	v3 := issueToken(t, db, mail.EmailVerification, "u2", "bob@example.com", t0, time.Hour)
	if _, proof, err := db.VerifyEmail(ctx, v3.tok.Hash, now, &more); err != nil || !proof.WasVerified {
		t.Fatalf("verified before: got %v %v", proof.WasVerified, err)
	}
	wantCounts(t, db, map[string]int{"session": 4}) // and u2's first
}
