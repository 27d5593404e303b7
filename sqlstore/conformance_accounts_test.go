package sqlstore_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sqlstore"
)

func oauthState(name string, at time.Time) issuer.OAuthState {
	return issuer.OAuthState{Hash: sha256.Sum256([]byte(name)), ProviderID: "corp", Sealed: []byte("sealed " + name),
		ExpiresAt: at.Add(10 * time.Minute), CreatedAt: at}
}

func providerAccount(id, userID, sub string, at time.Time) issuer.Account {
	return issuer.Account{ID: id, AccountID: sub, ProviderID: "corp", UserID: userID,
		AccessToken: []byte("sealed access " + id), IDToken: []byte("sealed id " + id),
		AccessTokenExpiresAt: at.Add(time.Hour), Scope: "openid,email,profile", CreatedAt: at, UpdatedAt: at}
}

// testOAuthStateSingleUse: a flow reads back whole, reading does not spend
// it, and of two replicas taking it at once exactly one succeeds.
func testOAuthStateSingleUse(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	st := oauthState("state-1", t0)
	if err := db.SaveOAuthState(ctx, st); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got, err := db.OAuthState(ctx, st.Hash); err != nil || !reflect.DeepEqual(got, st) {
			t.Fatalf("OAuthState: got %+v %v, want %+v", got, err, st)
		}
	}
	if _, err := db.OAuthState(ctx, sha256.Sum256([]byte("other"))); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("unknown state: got %v, want ErrNotFound", err)
	}
	replica := e.replica(t)
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := db
			if i%2 == 1 {
				h = replica
			}
			results[i] = h.TakeOAuthState(ctx, st.Hash)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range results {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, issuer.ErrNotFound):
			t.Errorf("take: got %v, want nil or ErrNotFound", err)
		}
	}
	if won != 1 {
		t.Errorf("got %d takes that succeeded, want exactly 1", won)
	}
	if _, err := db.OAuthState(ctx, st.Hash); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("after the take: got %v, want ErrNotFound", err)
	}
}

// testOAuthStateSweep: abandoned flows are deleted by a later save once
// expired, and live ones stay.
func testOAuthStateSweep(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	old := oauthState("old", t0.Add(-time.Hour))
	if err := db.SaveOAuthState(ctx, old); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 256; i++ {
		if err := db.SaveOAuthState(ctx, oauthState("live-"+string(rune('a'+i%26))+time.Duration(i).String(), t0)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.OAuthState(ctx, old.Hash); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("after 257 saves: got %v for the expired flow, want it swept", err)
	}
	wantCounts(t, db, map[string]int{"oauth_state": 256})
}

// testSocialUser: a user signing up through a provider arrives with its
// account (tokens as given) and session, all or nothing.
func testSocialUser(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	u, s := newUser("u1", "ann@example.com", t0)
	u.EmailVerified = true
	a := providerAccount("a1", "u1", "sub-ann", t0)
	if err := db.CreateSocialUser(ctx, u, a, s); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, db, map[string]int{"user": 1, "account": 1, "session": 1})
	gotA, gotU, err := db.AccountByProvider(ctx, "corp", "sub-ann")
	if err != nil || !reflect.DeepEqual(gotA, a) || !reflect.DeepEqual(gotU, u) {
		t.Errorf("AccountByProvider: got %+v %+v %v, want %+v %+v", gotA, gotU, err, a, u)
	}
	if _, _, err := db.AccountByProvider(ctx, "other", "sub-ann"); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("another provider's subject: got %v, want ErrNotFound", err)
	}
	if _, _, err := db.CredentialByEmail(ctx, "ann@example.com"); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("a social user has no password: got %v, want ErrNotFound", err)
	}
	// The same identity again (another replica's race), or the same email:
	// nothing of the second attempt stays.
	u2, s2 := newUser("u2", "bob@example.com", t0)
	if err := db.CreateSocialUser(ctx, u2, providerAccount("a2", "u2", "sub-ann", t0), s2); !errors.Is(err, issuer.ErrAccountTaken) {
		t.Errorf("same identity: got %v, want ErrAccountTaken", err)
	}
	u3, s3 := newUser("u3", "ann@example.com", t0)
	if err := db.CreateSocialUser(ctx, u3, providerAccount("a3", "u3", "sub-other", t0), s3); !errors.Is(err, issuer.ErrEmailTaken) {
		t.Errorf("same email: got %v, want ErrEmailTaken", err)
	}
	wantCounts(t, db, map[string]int{"user": 1, "account": 1, "session": 1})
}

// testLinkAccount: a provider account joins an existing user, with or
// without a session; a linked identity cannot be linked again.
func testLinkAccount(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	mustCreateUser(t, db, "u2", "bob@example.com", t0, t0.Add(time.Hour))
	_, s := newUser("u1", "", t0)
	s.ID, s.Token = "s-link", "t-link"
	if err := db.LinkAccount(ctx, providerAccount("a1", "u1", "sub-ann", t0.Add(time.Second)), s); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, db, map[string]int{"account": 3, "session": 3})
	if err := db.LinkAccount(ctx, providerAccount("a2", "u2", "sub-ann", t0), issuer.Session{}); !errors.Is(err, issuer.ErrAccountTaken) {
		t.Errorf("linked to another user: got %v, want ErrAccountTaken", err)
	}
	if err := db.LinkAccount(ctx, providerAccount("a3", "nobody", "sub-x", t0), issuer.Session{}); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("unknown user: got %v, want ErrNotFound", err)
	}
	accts, err := db.Accounts(ctx, "u1")
	if err != nil || len(accts) != 2 || accts[0].ProviderID != "credential" || accts[1].ID != "a1" {
		t.Errorf("Accounts: got %+v %v, want the credential then a1", accts, err)
	}
	wantCounts(t, db, map[string]int{"account": 3, "session": 3})
}

// testUpdateAccount: a returning user's tokens are replaced (a token the
// provider did not send again is cleared), the email is marked verified
// on request, and a session is added.
func testUpdateAccount(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	u, s := newUser("u1", "ann@example.com", t0)
	a := providerAccount("a1", "u1", "sub-ann", t0)
	a.RefreshToken = []byte("sealed refresh")
	if err := db.CreateSocialUser(ctx, u, a, s); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Hour)
	next := a
	next.AccessToken, next.RefreshToken, next.IDToken = []byte("sealed access 2"), nil, []byte("sealed id 2")
	next.AccessTokenExpiresAt, next.UpdatedAt = later.Add(time.Hour), later
	_, s2 := newUser("u1", "", later)
	s2.ID, s2.Token = "s-2", "t-2"
	if err := db.UpdateAccount(ctx, next, s2, true); err != nil {
		t.Fatal(err)
	}
	gotA, gotU, err := db.AccountByProvider(ctx, "corp", "sub-ann")
	if err != nil || !reflect.DeepEqual(gotA, next) {
		t.Errorf("got %+v %v, want %+v", gotA, err, next)
	}
	if !gotU.EmailVerified || !gotU.UpdatedAt.Equal(later) {
		t.Errorf("got user %+v, want it verified at %v", gotU, later)
	}
	wantCounts(t, db, map[string]int{"session": 2})
	gone := next
	gone.ID = "nope"
	if err := db.UpdateAccount(ctx, gone, issuer.Session{}, false); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("unknown account: got %v, want ErrNotFound", err)
	}
}

// testDeleteAccountKeepsLast: an account goes unless it is the user's
// last way to sign in; another user's account is not found.
func testDeleteAccountKeepsLast(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	mustCreateUser(t, db, "u2", "bob@example.com", t0, t0.Add(time.Hour))
	if err := db.LinkAccount(ctx, providerAccount("a1", "u1", "sub-ann", t0), issuer.Session{}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteAccount(ctx, "u2", "a1"); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("another user's account: got %v, want ErrNotFound", err)
	}
	if err := db.DeleteAccount(ctx, "u1", "a1"); err != nil {
		t.Errorf("got %v, want the provider account unlinked", err)
	}
	if err := db.DeleteAccount(ctx, "u1", "cred_u1"); !errors.Is(err, issuer.ErrLastAccount) {
		t.Errorf("last account: got %v, want ErrLastAccount", err)
	}
	wantCounts(t, db, map[string]int{"account": 2})
}

// testDeleteAccountConcurrent: two replicas unlinking a user's two
// accounts at once leave one, never none.
func testDeleteAccountConcurrent(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	if err := db.LinkAccount(ctx, providerAccount("a1", "u1", "sub-ann", t0), issuer.Session{}); err != nil {
		t.Fatal(err)
	}
	replica := e.replica(t)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, h := range []*sqlstore.DB{db, replica} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.DeleteAccount(ctx, "u1", []string{"a1", "cred_u1"}[i])
		}()
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Errorf("got %v and %v, want exactly one unlink to succeed", errs[0], errs[1])
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, issuer.ErrLastAccount) {
			t.Errorf("got %v, want ErrLastAccount for the loser", err)
		}
	}
	wantCounts(t, db, map[string]int{"account": 1})
}
