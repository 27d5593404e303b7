package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// testCreateMigratedUser: a user moved from a legacy application keeps
// its id (an integer, a UUID), gets its credential, roles and session in
// one transaction; a taken address or id is its own error and stores
// nothing; an unclaimed address is free to take.
func testCreateMigratedUser(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	u, s := newUser("42", "ann@example.com", t0)
	u.EmailVerified = true
	if err := db.CreateMigratedUser(ctx, u, "salt:hash", []string{"admin", "ops", "admin"}, s); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, db, map[string]int{"user": 1, "account": 1, "session": 1, "user_role": 2})
	if got, hash, err := db.CredentialByEmail(ctx, "ann@example.com"); err != nil || hash != "salt:hash" || !reflect.DeepEqual(got, u) {
		t.Errorf("CredentialByEmail: got %+v %q %v, want %+v %q", got, hash, err, u, "salt:hash")
	}
	if ok, err := db.HasAnyRole(ctx, "42", []string{"ops"}); err != nil || !ok {
		t.Errorf("HasAnyRole(ops): got %v %v, want true", ok, err)
	}
	// Without a session (an unverified address under
	// require_email_verification), a UUID id, no roles.
	uuid, _ := newUser("0b6f7c1e-8d2a-4c1e-9f3b-5a7d2e4c6b80", "bob@example.com", t0)
	if err := db.CreateMigratedUser(ctx, uuid, "salt:hash", nil, issuer.Session{}); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, db, map[string]int{"user": 2, "account": 2, "session": 1, "user_role": 2})

	tests := []struct {
		name string
		id   string
		addr string
		want error
	}{
		{"address taken", "43", "ann@example.com", issuer.ErrEmailTaken},
		{"id taken", "42", "cy@example.com", issuer.ErrUserIDTaken},
	}
	for _, tt := range tests {
		u, s := newUser(tt.id, tt.addr, t0)
		s.ID, s.Token = "s-other", "t-other"
		if err := db.CreateMigratedUser(ctx, u, "x:y", []string{"admin"}, s); !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, err, tt.want)
		}
		wantCounts(t, db, map[string]int{"user": 2, "account": 2, "session": 1, "user_role": 2})
	}

	// An address an identity provider left unclaimed reserves nothing:
	// the migrated user claims it.
	squat, ss := newUser("squat", "dee@example.com", t0)
	squat.EmailUnclaimed = true
	if err := db.CreateSocialUser(ctx, squat, providerAccount("a-squat", "squat", "sub-squat", t0), ss); err != nil {
		t.Fatal(err)
	}
	dee, ds := newUser("7", "dee@example.com", t0)
	if err := db.CreateMigratedUser(ctx, dee, "salt:hash", nil, ds); err != nil {
		t.Fatalf("migrating over an unclaimed address: %v", err)
	}
	if got, err := db.UserByEmail(ctx, "dee@example.com"); err != nil || got.ID != "7" {
		t.Errorf("UserByEmail after the migration: got %+v %v, want user 7", got, err)
	}
}

// testCreateMigratedUserConcurrent: the same legacy user migrated at once
// through two replicas (two sign-ins, each told yes by the legacy
// application) is stored once; every other attempt is ErrEmailTaken or
// ErrUserIDTaken, never another error.
func testCreateMigratedUserConcurrent(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	handles := []*sqlstore.DB{db, e.replica(t)}
	errs := atOnce(10, func(i int) error {
		u, s := newUser("42", "same@example.com", t0)
		s.ID, s.Token = fmt.Sprint("s", i), fmt.Sprint("t", i)
		return handles[i%2].CreateMigratedUser(ctx, u, "salt:hash", []string{"admin"}, s)
	})
	var created []int
	for i, err := range errs {
		if err == nil {
			created = append(created, i)
		} else if !errors.Is(err, issuer.ErrEmailTaken) && !errors.Is(err, issuer.ErrUserIDTaken) {
			t.Errorf("migration %d: got %v, want nil, ErrEmailTaken or ErrUserIDTaken", i, err)
		}
	}
	if len(created) != 1 {
		t.Errorf("got migrations %v through, want one", created)
	}
	wantCounts(t, db, map[string]int{"user": 1, "account": 1, "session": 1, "user_role": 1})
}

// atOnce calls fn(0) to fn(n-1) on goroutines released together and
// returns their errors, in order.
func atOnce(n int, fn func(i int) error) []error {
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}
