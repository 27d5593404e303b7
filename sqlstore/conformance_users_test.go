package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// newUser returns a user and its first session, named after id.
func newUser(id, email string, at time.Time) (issuer.User, issuer.Session) {
	u := issuer.User{ID: id, Name: "Name " + id, Email: email, CreatedAt: at, UpdatedAt: at}
	s := issuer.Session{ID: "s-" + id, Token: "t-" + id, UserID: id, ExpiresAt: at.Add(time.Hour),
		CreatedAt: at, UpdatedAt: at, IPAddress: "192.0.2.1", UserAgent: "test/1", Remember: true}
	return u, s
}

// mustCreateUser stores a user with one session expiring at sessionExp.
func mustCreateUser(t *testing.T, db *sqlstore.DB, id, email string, created, sessionExp time.Time) {
	t.Helper()
	u, s := newUser(id, email, created)
	s.ExpiresAt = sessionExp
	if err := db.CreateUser(context.Background(), u, "salt:hash", s); err != nil {
		t.Fatal(err)
	}
}

// testCreateUser: the user, its credential account and its first session
// are stored, and read back whole by every lookup.
func testCreateUser(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	u, s := newUser("u1", "ann@example.com", t0)
	u.EmailVerified, u.Image = true, ptr("https://example.com/ann.png")
	u.UpdatedAt = t0.Add(time.Second)
	if err := db.CreateUser(ctx, u, "salt:hash", s); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, db, map[string]int{"user": 1, "account": 1, "session": 1})

	gotU, hash, err := db.CredentialByEmail(ctx, "ann@example.com")
	if err != nil || hash != "salt:hash" || !reflect.DeepEqual(gotU, u) {
		t.Errorf("CredentialByEmail: got %+v %q %v, want %+v %q", gotU, hash, err, u, "salt:hash")
	}
	gotS, gotU, err := db.SessionByToken(ctx, s.Token)
	if err != nil || !reflect.DeepEqual(gotS, s) || !reflect.DeepEqual(gotU, u) {
		t.Errorf("SessionByToken: got %+v %+v %v, want %+v %+v", gotS, gotU, err, s, u)
	}
	if gotU, err := db.UserByEmail(ctx, "ann@example.com"); err != nil || !reflect.DeepEqual(gotU, u) {
		t.Errorf("UserByEmail: got %+v %v, want %+v", gotU, err, u)
	}
	if hash, err := db.PasswordHash(ctx, "u1"); err != nil || hash != "salt:hash" {
		t.Errorf("PasswordHash: got %q %v, want %q", hash, err, "salt:hash")
	}
	// Emails are stored lower-cased by the issuer and matched exactly by
	// both engines (no engine may fold case on its own).
	for _, email := range []string{"nobody@example.com", "ANN@example.com", "ann@example.com ", ""} {
		if _, _, err := db.CredentialByEmail(ctx, email); !errors.Is(err, issuer.ErrNotFound) {
			t.Errorf("CredentialByEmail(%q): got %v, want ErrNotFound", email, err)
		}
	}
	if _, err := db.PasswordHash(ctx, "nobody"); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("PasswordHash(unknown): got %v, want ErrNotFound", err)
	}
}

// testCreateUserAtomic: a refused sign-up leaves no row behind, whichever
// of its three inserts failed.
func testCreateUserAtomic(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	u, s := newUser("u1", "ann@example.com", t0)
	if err := db.CreateUser(ctx, u, "salt:hash", s); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		u         issuer.User
		s         issuer.Session
		wantTaken bool
	}{
		// The user insert fails: ErrEmailTaken, and nothing else.
		{"same email", issuer.User{ID: "u2", Name: "B", Email: "ann@example.com", CreatedAt: t0, UpdatedAt: t0},
			issuer.Session{ID: "s2", Token: "t2", UserID: "u2", ExpiresAt: t0, CreatedAt: t0, UpdatedAt: t0}, true},
		// The session insert, last of three, fails: the user and account
		// inserted before it must go too.
		{"session token taken", issuer.User{ID: "u3", Name: "C", Email: "cy@example.com", CreatedAt: t0, UpdatedAt: t0},
			issuer.Session{ID: "s3", Token: s.Token, UserID: "u3", ExpiresAt: t0, CreatedAt: t0, UpdatedAt: t0}, false},
		{"session id taken", issuer.User{ID: "u4", Name: "D", Email: "di@example.com", CreatedAt: t0, UpdatedAt: t0},
			issuer.Session{ID: s.ID, Token: "t4", UserID: "u4", ExpiresAt: t0, CreatedAt: t0, UpdatedAt: t0}, false},
		// A session for another user than the one created: the foreign key
		// holds on both engines.
		{"session of unknown user", issuer.User{ID: "u5", Name: "E", Email: "ed@example.com", CreatedAt: t0, UpdatedAt: t0},
			issuer.Session{ID: "s5", Token: "t5", UserID: "nobody", ExpiresAt: t0, CreatedAt: t0, UpdatedAt: t0}, false},
	}
	for _, tt := range tests {
		err := db.CreateUser(ctx, tt.u, "x:y", tt.s)
		if err == nil || errors.Is(err, issuer.ErrEmailTaken) != tt.wantTaken {
			t.Errorf("%s: got %v, want an error (ErrEmailTaken: %v)", tt.name, err, tt.wantTaken)
		}
		wantCounts(t, db, map[string]int{"user": 1, "account": 1, "session": 1})
		if tt.u.Email != u.Email {
			if _, _, err := db.CredentialByEmail(ctx, tt.u.Email); !errors.Is(err, issuer.ErrNotFound) {
				t.Errorf("%s: the refused user can be found: %v", tt.name, err)
			}
		}
	}
	// The original user is untouched.
	if _, hash, err := db.CredentialByEmail(ctx, u.Email); err != nil || hash != "salt:hash" {
		t.Errorf("first user: got %q %v, want its hash", hash, err)
	}
}

// testCreateUserConcurrentReplicas: one email signed up at once through two
// replicas makes one user; every other attempt is ErrEmailTaken, never
// another error (a deadlock, a serialization failure, SQLITE_BUSY).
func testCreateUserConcurrentReplicas(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	handles := []*sqlstore.DB{db, e.replica(t)}
	const n = 10
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			u, s := newUser(fmt.Sprint("u", i), "same@example.com", t0)
			<-start
			errs[i] = handles[i%2].CreateUser(ctx, u, "salt:hash", s)
		})
	}
	close(start)
	wg.Wait()
	created := 0
	for i, err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, issuer.ErrEmailTaken):
			t.Errorf("sign-up %d: got %v, want nil or ErrEmailTaken", i, err)
		}
	}
	if created != 1 {
		t.Errorf("got %d sign-ups through, want 1", created)
	}
	wantCounts(t, db, map[string]int{"user": 1, "account": 1, "session": 1})
}

// testUserFieldsRoundTrip: nil and set (even empty) images, both values of
// email_verified, and instants to the millisecond in any time zone come
// back as stored, in UTC.
func testUserFieldsRoundTrip(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	precise := time.Date(2025, 6, 1, 17, 30, 0, 123_456_789, zone) // 12:00:00.123456789 UTC
	users := []issuer.User{
		{ID: "u1", Name: "No image", Email: "a@example.com", CreatedAt: t0, UpdatedAt: t0},
		{ID: "u2", Name: "Image", Email: "b@example.com", EmailVerified: true, Image: ptr("https://example.com/b.png"), CreatedAt: t0, UpdatedAt: t0},
		{ID: "u3", Name: "", Email: "c@example.com", Image: ptr(""), CreatedAt: t0, UpdatedAt: t0},
		{ID: "u4", Name: "Zoned", Email: "d@example.com", CreatedAt: precise, UpdatedAt: precise.Add(999 * time.Microsecond)},
		{ID: "u5", Name: "Ünïcødé ✓ 'quote' \"dq\"", Email: "e@example.com", CreatedAt: t0, UpdatedAt: t0},
	}
	for _, u := range users {
		s := issuer.Session{ID: "s-" + u.ID, Token: "t-" + u.ID, UserID: u.ID, ExpiresAt: precise.Add(time.Hour),
			CreatedAt: precise, UpdatedAt: precise, Remember: u.EmailVerified}
		if err := db.CreateUser(ctx, u, "h", s); err != nil {
			t.Fatal(err)
		}
		want := u
		want.CreatedAt = u.CreatedAt.Truncate(time.Millisecond).UTC()
		want.UpdatedAt = u.UpdatedAt.Truncate(time.Millisecond).UTC()
		got, _, err := db.CredentialByEmail(ctx, u.Email)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("CredentialByEmail %s: got %+v %v, want %+v", u.ID, got, err, want)
		}
		gotS, gotU, err := db.SessionByToken(ctx, s.Token)
		wantS := s
		wantS.ExpiresAt = s.ExpiresAt.Truncate(time.Millisecond).UTC()
		wantS.CreatedAt = s.CreatedAt.Truncate(time.Millisecond).UTC()
		wantS.UpdatedAt = wantS.CreatedAt
		if err != nil || !reflect.DeepEqual(gotU, want) || !reflect.DeepEqual(gotS, wantS) {
			t.Errorf("SessionByToken %s: got %+v %+v %v, want %+v %+v", u.ID, gotS, gotU, err, wantS, want)
		}
	}
	if got, _ := db.UserByEmail(ctx, "d@example.com"); got.CreatedAt.Nanosecond() != 123_000_000 || got.CreatedAt.Location() != time.UTC {
		t.Errorf("instant: got %v, want 12:00:00.123 UTC", got.CreatedAt)
	}
}

// testPasswords: SetPassword replaces the credential hash; a user without
// a credential (or a password on it) has none.
func testPasswords(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	// An account without a password can only come from a copy (Import):
	// Better Auth makes them for social sign-ins.
	err := db.Import(ctx, issuer.Snapshot{
		Users: []issuer.User{
			{ID: "u1", Name: "Pw", Email: "pw@example.com", CreatedAt: t0, UpdatedAt: t0},
			{ID: "u2", Name: "Social", Email: "social@example.com", CreatedAt: t0, UpdatedAt: t0},
			{ID: "u3", Name: "No account", Email: "none@example.com", CreatedAt: t0, UpdatedAt: t0},
		},
		Accounts: []issuer.Account{
			{ID: "cred_u1", AccountID: "u1", ProviderID: "credential", UserID: "u1", Password: ptr("old"), CreatedAt: t0, UpdatedAt: t0},
			{ID: "cred_u2", AccountID: "u2", ProviderID: "credential", UserID: "u2", CreatedAt: t0, UpdatedAt: t0},
			{ID: "gh_u2", AccountID: "12345", ProviderID: "github", UserID: "u2", Password: ptr("not a credential"), CreatedAt: t0, UpdatedAt: t0},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"u2", "u3", "nobody"} {
		if h, err := db.PasswordHash(ctx, id); !errors.Is(err, issuer.ErrNotFound) {
			t.Errorf("PasswordHash(%s): got %q %v, want ErrNotFound", id, h, err)
		}
	}
	for _, email := range []string{"social@example.com", "none@example.com"} {
		if _, h, err := db.CredentialByEmail(ctx, email); !errors.Is(err, issuer.ErrNotFound) {
			t.Errorf("CredentialByEmail(%s): got %q %v, want ErrNotFound", email, h, err)
		}
	}

	later := t0.Add(time.Hour)
	if err := db.SetPassword(ctx, "u1", "new", later); err != nil {
		t.Fatal(err)
	}
	if h, err := db.PasswordHash(ctx, "u1"); err != nil || h != "new" {
		t.Errorf("PasswordHash after SetPassword: got %q %v, want %q", h, err, "new")
	}
	if _, h, err := db.CredentialByEmail(ctx, "pw@example.com"); err != nil || h != "new" {
		t.Errorf("CredentialByEmail after SetPassword: got %q %v, want %q", h, err, "new")
	}
	for _, id := range []string{"u3", "nobody"} {
		if err := db.SetPassword(ctx, id, "x", later); !errors.Is(err, issuer.ErrNotFound) {
			t.Errorf("SetPassword(%s): got %v, want ErrNotFound", id, err)
		}
	}
	snap, err := db.Export(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range snap.Accounts {
		wantPw, wantAt := a.Password, t0
		switch a.ID {
		case "cred_u1":
			wantPw, wantAt = ptr("new"), later
		case "gh_u2":
			wantPw = ptr("not a credential") // only the credential account changes
		}
		if !reflect.DeepEqual(a.Password, wantPw) || !a.UpdatedAt.Equal(wantAt) {
			t.Errorf("account %s: got password %v updated %v, want %v %v", a.ID, deref(a.Password), a.UpdatedAt, deref(wantPw), wantAt)
		}
	}
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", *p)
}
