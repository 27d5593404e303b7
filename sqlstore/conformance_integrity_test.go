package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/mail"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// Account integrity (issue 30): who holds an address, and what a first
// proof of it removes.

// linkProvider adds a provider account of providerID to the user.
func linkProvider(t *testing.T, db *sqlstore.DB, id, userID, providerID string) {
	t.Helper()
	a := providerAccount(id, userID, "sub-"+id, t0)
	a.ProviderID = providerID
	if err := db.LinkAccount(context.Background(), a, issuer.Session{}); err != nil {
		t.Fatalf("link %s to %s: %v", providerID, userID, err)
	}
}

// providersOf lists the provider ids of the user's accounts, sorted.
func providersOf(t *testing.T, db *sqlstore.DB, userID string) []string {
	t.Helper()
	as, err := db.Accounts(context.Background(), userID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range as {
		out = append(out, a.ProviderID)
	}
	slices.Sort(out)
	return out
}

// testProofUnlinks: a reset, a verification or a change of address that
// proves an address for the first time removes the provider accounts
// linked before it, and says which; once the address is verified, a
// later proof removes nothing.
func testProofUnlinks(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	cases := []struct {
		name     string
		verified bool
		prove    func(userID, email string) (issuer.User, issuer.Proof, error)
		want     []string // unlinked
		// wasVerified is what the proof says: a change of address counts
		// as verified (it signs nobody in).
		wasVerified bool
	}{
		{"reset, unverified", false, func(id, email string) (issuer.User, issuer.Proof, error) {
			r := issueToken(t, db, mail.PasswordReset, id, email, t0, time.Hour)
			return db.ResetPassword(ctx, r.tok.Hash, "new:hash", true, t0.Add(time.Minute))
		}, []string{"corp", "github"}, false},
		{"verification, unverified", false, func(id, email string) (issuer.User, issuer.Proof, error) {
			v := issueToken(t, db, mail.EmailVerification, id, email, t0, time.Hour)
			return db.VerifyEmail(ctx, v.tok.Hash, t0.Add(time.Minute), nil)
		}, []string{"corp", "github"}, false},
		{"change of address, unverified", false, func(id, email string) (issuer.User, issuer.Proof, error) {
			c := issueToken(t, db, issuer.KindChangeEmail, id, "new-"+email, t0, time.Hour)
			return db.VerifyEmail(ctx, c.tok.Hash, t0.Add(time.Minute), nil)
		}, []string{"corp", "github"}, true},
		{"change of address, verified", true, func(id, email string) (issuer.User, issuer.Proof, error) {
			// The new address is proven for the first time, whatever the
			// old one was.
			c := issueToken(t, db, issuer.KindChangeEmail, id, "new-"+email, t0, time.Hour)
			return db.VerifyEmail(ctx, c.tok.Hash, t0.Add(time.Minute), nil)
		}, []string{"corp", "github"}, true},
		{"reset, verified", true, func(id, email string) (issuer.User, issuer.Proof, error) {
			r := issueToken(t, db, mail.PasswordReset, id, email, t0, time.Hour)
			return db.ResetPassword(ctx, r.tok.Hash, "new:hash", true, t0.Add(time.Minute))
		}, nil, true},
		{"verification, verified", true, func(id, email string) (issuer.User, issuer.Proof, error) {
			v := issueToken(t, db, mail.EmailVerification, id, email, t0, time.Hour)
			return db.VerifyEmail(ctx, v.tok.Hash, t0.Add(time.Minute), nil)
		}, nil, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, email := fmt.Sprint("u", i), fmt.Sprintf("user%d@example.com", i)
			mustCreateUser(t, db, id, email, t0, t0.Add(time.Hour))
			if tc.verified {
				rawExec(t, e, `UPDATE "user" SET email_verified = true WHERE id = ?`, id)
			}
			linkProvider(t, db, "gh-"+id, id, "github")
			linkProvider(t, db, "corp-"+id, id, "corp")
			u, p, err := tc.prove(id, email)
			if err != nil {
				t.Fatalf("prove: %v", err)
			}
			if !u.EmailVerified || p.WasVerified != tc.wasVerified {
				t.Errorf("got user verified %v, proof %+v; want verified, WasVerified %v", u.EmailVerified, p, tc.wasVerified)
			}
			if !reflect.DeepEqual(p.Unlinked, tc.want) {
				t.Errorf("unlinked: got %q, want %q", p.Unlinked, tc.want)
			}
			want := []string{"corp", "credential", "github"}
			if tc.want != nil {
				want = []string{"credential"}
			}
			if got := providersOf(t, db, id); !reflect.DeepEqual(got, want) {
				t.Errorf("accounts left: got %q, want %q", got, want)
			}
		})
	}
}

// testUnclaimedEmail: an address a provider did not verify is stored
// unclaimed and reserves nothing: a password user takes it, lookups on a
// request's behalf never find the unclaimed user, no link proves it, and
// an operator's lookup finds it only when nobody claims the address and
// it is the only one showing it.
func testUnclaimedEmail(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	const addr = "victim@example.com"
	squat, ss := newUser("squat", addr, t0)
	squat.EmailUnclaimed = true
	if err := db.CreateSocialUser(ctx, squat, providerAccount("a-squat", "squat", "sub-squat", t0), ss); err != nil {
		t.Fatalf("unclaimed social user: %v", err)
	}
	if _, u, err := db.AccountByProvider(ctx, "corp", "sub-squat"); err != nil || !reflect.DeepEqual(u, squat) {
		t.Errorf("AccountByProvider: got %+v %v, want %+v", u, err, squat)
	}
	// Nobody claims it yet.
	if _, err := db.UserByEmail(ctx, addr); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("UserByEmail with only an unclaimed user: got %v, want ErrNotFound", err)
	}
	if u, err := db.OperatorUserByEmail(ctx, addr); err != nil || u.ID != "squat" {
		t.Errorf("OperatorUserByEmail with one unclaimed user: got %+v %v, want squat", u, err)
	}
	// A second unclaimed user with the address: allowed, and an operator's
	// lookup is ambiguous.
	squat2, ss2 := newUser("squat2", addr, t0.Add(time.Second))
	squat2.EmailUnclaimed = true
	if err := db.CreateSocialUser(ctx, squat2, providerAccount("a-squat2", "squat2", "sub-squat2", t0), ss2); err != nil {
		t.Fatalf("second unclaimed social user: %v", err)
	}
	if _, err := db.OperatorUserByEmail(ctx, addr); !errors.Is(err, sqlstore.ErrAmbiguousEmail) {
		t.Errorf("OperatorUserByEmail with two unclaimed users: got %v, want ErrAmbiguousEmail", err)
	}
	if _, err := db.GrantRoleByEmail(ctx, addr, "admin", t0); !errors.Is(err, sqlstore.ErrAmbiguousEmail) {
		t.Errorf("GrantRoleByEmail with two unclaimed users: got %v, want ErrAmbiguousEmail", err)
	}
	// Links issued for an unclaimed address (before the upgrade that
	// marked it, say) prove nothing: refused and spent.
	v := issueToken(t, db, mail.EmailVerification, "squat", addr, t0, time.Hour)
	if _, _, err := db.VerifyEmail(ctx, v.tok.Hash, t0.Add(time.Minute), nil); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("verification of an unclaimed address: got %v, want ErrNotFound", err)
	}
	r := issueToken(t, db, mail.PasswordReset, "squat", addr, t0, time.Hour)
	if _, _, err := db.ResetPassword(ctx, r.tok.Hash, "x:y", true, t0.Add(time.Minute)); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("reset of an unclaimed address: got %v, want ErrNotFound", err)
	}
	wantCounts(t, db, map[string]int{"recovery_token": 0, "session": 2})

	// The owner signs up with a password: not blocked.
	mustCreateUser(t, db, "owner", addr, t0, t0.Add(time.Hour))
	for _, look := range []struct {
		name string
		id   func() (string, error)
	}{
		{"CredentialByEmail", func() (string, error) { u, _, err := db.CredentialByEmail(ctx, addr); return u.ID, err }},
		{"UserByEmail", func() (string, error) { u, err := db.UserByEmail(ctx, addr); return u.ID, err }},
		{"OperatorUserByEmail", func() (string, error) { u, err := db.OperatorUserByEmail(ctx, addr); return u.ID, err }},
	} {
		if id, err := look.id(); err != nil || id != "owner" {
			t.Errorf("%s: got %q %v, want owner", look.name, id, err)
		}
	}
	// The address is claimed now: a second claim is refused, an
	// unclaimed one is not.
	dup, ds := newUser("dup", addr, t0)
	if err := db.CreateUser(ctx, dup, "salt:hash", ds); !errors.Is(err, issuer.ErrEmailTaken) {
		t.Errorf("second password user: got %v, want ErrEmailTaken", err)
	}
	if err := db.CreateSocialUser(ctx, dup, providerAccount("a-dup", "dup", "sub-dup", t0), ds); !errors.Is(err, issuer.ErrEmailTaken) {
		t.Errorf("claiming social user: got %v, want ErrEmailTaken", err)
	}
	// Moving to the address: refused for a claimed one, allowed past
	// unclaimed ones.
	mustCreateUser(t, db, "other", "other@example.com", t0, t0.Add(time.Hour))
	if _, err := db.SetEmail(ctx, "other", addr, t0); !errors.Is(err, issuer.ErrEmailTaken) {
		t.Errorf("SetEmail to a claimed address: got %v, want ErrEmailTaken", err)
	}
	const shown = "shown@example.com"
	squat3, ss3 := newUser("squat3", shown, t0)
	squat3.EmailUnclaimed = true
	if err := db.CreateSocialUser(ctx, squat3, providerAccount("a-squat3", "squat3", "sub-squat3", t0), ss3); err != nil {
		t.Fatal(err)
	}
	c := issueToken(t, db, issuer.KindChangeEmail, "other", shown, t0, time.Hour)
	if u, _, err := db.VerifyEmail(ctx, c.tok.Hash, t0.Add(time.Minute), nil); err != nil || u.Email != shown || !u.EmailVerified || u.EmailUnclaimed {
		t.Errorf("change of address past an unclaimed user: got %+v %v, want moved, verified", u, err)
	}

	// The flag survives db copy.
	other := e.freshOther(t)
	if err := other.Import(ctx, mustExport(t, db)); err != nil {
		t.Fatal(err)
	}
	if got, want := mustExport(t, other), mustExport(t, db); !reflect.DeepEqual(got.Users, want.Users) {
		t.Errorf("users after db copy: got %+v, want %+v", got.Users, want.Users)
	}
}

// testMigrateUnclaimed: a database made before account integrity (schema
// 5) keeps every row through the migration, on SQLite too, where the user
// table is rebuilt with foreign keys off (dropped with them on, it would
// take every account, session and role along); and a user a provider
// made from an address it did not verify (no password, unverified) is
// marked unclaimed, so its address stops blocking the owner.
func testMigrateUnclaimed(t *testing.T, _ *sqlstore.DB, e env) {
	ctx := context.Background()
	d := e.self.fresh(t)
	raw := d.raw(t)
	names := migrationFiles(t, e.self.name)
	for _, name := range names[:5] {
		body, err := os.ReadFile("migrations/" + e.self.name + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(string(body)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	switch e.self.name {
	case "sqlite":
		if _, err := raw.Exec(`PRAGMA user_version = 5`); err != nil {
			t.Fatal(err)
		}
	case "postgres":
		if _, err := raw.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
			t.Fatal(err)
		}
		for i, name := range names[:5] {
			if _, err := raw.Exec(`INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, i+1, name); err != nil {
				t.Fatal(err)
			}
		}
	}
	ms, later := t0.UnixMilli(), t0.Add(time.Hour).UnixMilli()
	for _, row := range []struct {
		q    string
		args []any
	}{
		// ann: a password user. squat: a provider user, unverified, no
		// password. bo: a provider user, verified. mal: a password user,
		// unverified, with a provider linked (the takeover's first step).
		{`INSERT INTO "user" (id, name, email, email_verified, created_at, updated_at) VALUES ('ann', 'Ann', 'ann@example.com', true, ?, ?)`, []any{ms, ms}},
		{`INSERT INTO "user" (id, name, email, email_verified, created_at, updated_at) VALUES ('squat', 'S', 'victim@example.com', false, ?, ?)`, []any{ms, ms}},
		{`INSERT INTO "user" (id, name, email, email_verified, created_at, updated_at) VALUES ('bo', 'Bo', 'bo@example.com', true, ?, ?)`, []any{ms, ms}},
		{`INSERT INTO "user" (id, name, email, email_verified, created_at, updated_at) VALUES ('mal', 'M', 'mal@example.com', false, ?, ?)`, []any{ms, ms}},
		{`INSERT INTO account (id, account_id, provider_id, user_id, password, created_at, updated_at) VALUES ('cred_ann', 'ann', 'credential', 'ann', 'salt:hash', ?, ?)`, []any{ms, ms}},
		{`INSERT INTO account (id, account_id, provider_id, user_id, created_at, updated_at) VALUES ('a-squat', 'sub-squat', 'corp', 'squat', ?, ?)`, []any{ms, ms}},
		{`INSERT INTO account (id, account_id, provider_id, user_id, created_at, updated_at) VALUES ('a-bo', 'sub-bo', 'corp', 'bo', ?, ?)`, []any{ms, ms}},
		{`INSERT INTO account (id, account_id, provider_id, user_id, password, created_at, updated_at) VALUES ('cred_mal', 'mal', 'credential', 'mal', 'salt:hash', ?, ?)`, []any{ms, ms}},
		{`INSERT INTO account (id, account_id, provider_id, user_id, created_at, updated_at) VALUES ('a-mal', 'sub-mal', 'corp', 'mal', ?, ?)`, []any{ms, ms}},
		{`INSERT INTO session (id, token, user_id, expires_at, created_at, updated_at) VALUES ('s-ann', 't-ann', 'ann', ?, ?, ?)`, []any{later, ms, ms}},
		{`INSERT INTO session (id, token, user_id, expires_at, created_at, updated_at) VALUES ('s-squat', 't-squat', 'squat', ?, ?, ?)`, []any{later, ms, ms}},
		{`INSERT INTO user_role (user_id, role, created_at) VALUES ('ann', 'admin', ?)`, []any{ms}},
	} {
		if _, err := raw.Exec(rawQuery(e, row.q), row.args...); err != nil {
			t.Fatalf("%s: %v", row.q, err)
		}
	}
	db := d.mustOpen(t)
	wantCounts(t, db, map[string]int{"user": 4, "account": 5, "session": 2, "user_role": 1})
	for _, tc := range []struct {
		id        string
		unclaimed bool
	}{{"ann", false}, {"squat", true}, {"bo", false}, {"mal", false}} {
		u, err := db.UserByID(ctx, tc.id)
		if err != nil || u.EmailUnclaimed != tc.unclaimed {
			t.Errorf("%s: got unclaimed %v (%v), want %v", tc.id, u.EmailUnclaimed, err, tc.unclaimed)
		}
	}
	if got, err := db.HasAnyRole(ctx, "ann", []string{"admin"}); err != nil || !got {
		t.Errorf("ann's role after the migration: got %v %v, want kept", got, err)
	}
	// The owner of the squatted address signs up.
	mustCreateUser(t, db, "victim", "victim@example.com", t0, t0.Add(time.Hour))
	// The constraint still holds among claiming users.
	dup, ds := newUser("dup", "ann@example.com", t0)
	if err := db.CreateUser(ctx, dup, "salt:hash", ds); !errors.Is(err, issuer.ErrEmailTaken) {
		t.Errorf("a taken address after the migration: got %v, want ErrEmailTaken", err)
	}
}
