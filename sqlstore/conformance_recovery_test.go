package sqlstore_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/mail"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// recoveryStore is what issue 16 adds to issuer.Store; the lead adds it
// there. Until then this keeps *DB's method set from drifting.
type recoveryStore interface {
	IssueRecoveryToken(ctx context.Context, t issuer.RecoveryToken, q mail.Queued) error
	ResetTokenValid(ctx context.Context, hash [32]byte, now time.Time) (bool, error)
	ResetPassword(ctx context.Context, hash [32]byte, passwordHash string, revokeSessions bool, now time.Time) (issuer.User, issuer.Proof, error)
	VerifyEmail(ctx context.Context, hash [32]byte, now time.Time, signIn *issuer.Session) (issuer.User, issuer.Proof, error)
}

// outboxAdmin is what the CLI's "outbox list|retry" needs besides the
// worker's mail.Queue.
type outboxAdmin interface {
	ListOutbox(ctx context.Context, state string) ([]mail.Queued, error)
	RetryOutbox(ctx context.Context, id string, now time.Time) (bool, error)
	SweepOutbox(ctx context.Context, now time.Time) (int, error)
}

var (
	_ recoveryStore = (*sqlstore.DB)(nil)
	_ mail.Queue    = (*sqlstore.DB)(nil)
	_ outboxAdmin   = (*sqlstore.DB)(nil)
)

// newToken returns a fresh token as the issuer makes one (32 random bytes,
// base64url) and the SHA-256 of its text, which is all a store keeps.
func newToken(t *testing.T) (string, [32]byte) {
	t.Helper()
	b := make([]byte, 32)
	rand.Read(b)
	s := base64.RawURLEncoding.EncodeToString(b)
	return s, sha256.Sum256([]byte(s))
}

func newMsgID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "msg_" + hex.EncodeToString(b)
}

// issued is one IssueRecoveryToken call's token and message.
type issued struct {
	text string
	tok  issuer.RecoveryToken
	msg  mail.Queued
}

// issueToken issues a token of kind for the user, created at at and valid
// for ttl, with a random sealed payload (opaque to the store).
func issueToken(t *testing.T, db *sqlstore.DB, kind mail.Kind, userID, email string, at time.Time, ttl time.Duration) issued {
	t.Helper()
	text, hash := newToken(t)
	sealed := make([]byte, 80)
	rand.Read(sealed)
	is := issued{
		text: text,
		tok:  issuer.RecoveryToken{Hash: hash, Kind: kind, UserID: userID, Email: email, ExpiresAt: at.Add(ttl), CreatedAt: at},
		msg:  mail.Queued{ID: newMsgID(), Kind: kind, UserID: userID, Sealed: sealed, CreatedAt: at},
	}
	if err := db.IssueRecoveryToken(context.Background(), is.tok, is.msg); err != nil {
		t.Fatalf("issue %s for %s: %v", kind, userID, err)
	}
	is.msg.State, is.msg.NextAttemptAt = "pending", at
	return is
}

// rawQuery runs a "?" query through a raw handle on the case's database,
// in the engine's placeholder syntax.
func rawQuery(e env, q string) string {
	if e.self.name != "postgres" {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// rawInt reads one integer through a raw handle.
func rawInt(t *testing.T, e env, q string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.raw(t).QueryRow(rawQuery(e, q), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func rawExec(t *testing.T, e env, q string, args ...any) {
	t.Helper()
	if _, err := e.db.raw(t).Exec(rawQuery(e, q), args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func tokenValid(t *testing.T, db *sqlstore.DB, hash [32]byte, now time.Time) bool {
	t.Helper()
	ok, err := db.ResetTokenValid(context.Background(), hash, now)
	if err != nil {
		t.Fatalf("ResetTokenValid: %v", err)
	}
	return ok
}

// testIssueRecoveryToken: the token and its message are stored together; a
// new token replaces the user's older ones of its kind and no other; a
// refused issue writes nothing, not even the delete of the older tokens.
func testIssueRecoveryToken(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	mustCreateUser(t, db, "u2", "bob@example.com", t0, t0.Add(time.Hour))

	first := issueToken(t, db, mail.PasswordReset, "u1", "ann@example.com", t0, time.Hour)
	wantCounts(t, db, map[string]int{"recovery_token": 1, "outbox": 1})
	if !tokenValid(t, db, first.tok.Hash, t0) {
		t.Fatal("a fresh reset token is not valid")
	}
	got, err := db.ListOutbox(ctx, "")
	want := first.msg
	want.Sealed = nil // never listed
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("ListOutbox: got %+v %v, want [%+v]", got, err, want)
	}
	// The message is due at once, with its payload as given.
	claimed, err := db.ClaimOutbox(ctx, "w", 10, time.Minute, t0)
	want = first.msg
	want.Attempts = 1 // the claim's
	if err != nil || len(claimed) != 1 || !reflect.DeepEqual(claimed[0], want) {
		t.Fatalf("ClaimOutbox: got %+v %v, want [%+v]", claimed, err, want)
	}

	// Another user's token and a verification token of u1 are not
	// replaced by u1's next reset token; u1's first reset token is.
	bob := issueToken(t, db, mail.PasswordReset, "u2", "bob@example.com", t0, time.Hour)
	verify := issueToken(t, db, mail.EmailVerification, "u1", "ann@example.com", t0, time.Hour)
	second := issueToken(t, db, mail.PasswordReset, "u1", "ann@example.com", t0.Add(time.Second), time.Hour)
	if tokenValid(t, db, first.tok.Hash, t0.Add(time.Second)) {
		t.Error("the older reset token is still valid after a new one")
	}
	if !tokenValid(t, db, second.tok.Hash, t0.Add(time.Second)) || !tokenValid(t, db, bob.tok.Hash, t0.Add(time.Second)) {
		t.Error("the new reset token, or another user's, is not valid")
	}
	// Every message stays queued: replacing a token cancels no mail (its
	// link just stops working).
	wantCounts(t, db, map[string]int{"recovery_token": 3, "outbox": 4})
	// ResetTokenValid knows reset tokens only.
	if tokenValid(t, db, verify.tok.Hash, t0) {
		t.Error("ResetTokenValid accepts a verification token")
	}

	before := mustExport(t, db)
	_, h := newToken(t)
	okTok := issuer.RecoveryToken{Hash: h, Kind: mail.PasswordReset, UserID: "u1", Email: "ann@example.com", ExpiresAt: t0.Add(time.Hour), CreatedAt: t0}
	okMsg := mail.Queued{ID: newMsgID(), Kind: mail.PasswordReset, Sealed: []byte("sealed"), CreatedAt: t0}
	tests := []struct {
		name         string
		tok          issuer.RecoveryToken
		msg          mail.Queued
		wantNotFound bool
	}{
		{"unknown user", func() issuer.RecoveryToken { r := okTok; r.UserID = "nobody"; return r }(), okMsg, true},
		{"kinds differ", okTok, func() mail.Queued { m := okMsg; m.Kind = mail.EmailVerification; return m }(), false},
		{"no kind", func() issuer.RecoveryToken { r := okTok; r.Kind = ""; return r }(), func() mail.Queued { m := okMsg; m.Kind = ""; return m }(), false},
		{"no payload", okTok, func() mail.Queued { m := okMsg; m.Sealed = nil; return m }(), false},
		// The last insert fails: the delete of u1's older reset token
		// and the token's insert must be undone with it.
		{"message id taken", okTok, func() mail.Queued { m := okMsg; m.ID = first.msg.ID; return m }(), false},
		{"token hash taken", func() issuer.RecoveryToken { r := okTok; r.Hash = bob.tok.Hash; return r }(), okMsg, false},
	}
	for _, tt := range tests {
		err := db.IssueRecoveryToken(ctx, tt.tok, tt.msg)
		if err == nil || errors.Is(err, issuer.ErrNotFound) != tt.wantNotFound {
			t.Errorf("%s: got %v, want an error (ErrNotFound: %v)", tt.name, err, tt.wantNotFound)
		}
		if after := mustExport(t, db); !reflect.DeepEqual(after, before) {
			t.Errorf("%s: a refused issue changed the database:\ngot  %+v\nwant %+v", tt.name, after, before)
		}
	}
	if !tokenValid(t, db, second.tok.Hash, t0.Add(time.Second)) {
		t.Error("after refused issues: u1's reset token is no longer valid")
	}

	// No message: an operator's printed link. The token replaces the
	// older ones all the same; nothing is queued.
	if err := db.IssueRecoveryToken(ctx, okTok, mail.Queued{}); err != nil {
		t.Fatalf("issue without a message: %v", err)
	}
	if tokenValid(t, db, second.tok.Hash, t0.Add(time.Second)) || !tokenValid(t, db, okTok.Hash, t0.Add(time.Second)) {
		t.Error("a token issued without a message did not replace the older one")
	}
	wantCounts(t, db, map[string]int{"recovery_token": 3, "outbox": 4})
}

// testRecoveryTokenExpiry: a token is valid while now is before its
// expiry, not at it; an expired token is refused by ResetPassword and
// VerifyEmail, and deleted by the refusal.
func testRecoveryTokenExpiry(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	exp := t0.Add(time.Hour)
	r := issueToken(t, db, mail.PasswordReset, "u1", "ann@example.com", t0, time.Hour)
	for _, tt := range []struct {
		at   time.Time
		want bool
	}{
		{t0, true},
		{exp.Add(-time.Millisecond), true},
		{exp, false},
		{exp.Add(time.Millisecond), false},
		{exp.Add(24 * time.Hour), false},
	} {
		if got := tokenValid(t, db, r.tok.Hash, tt.at); got != tt.want {
			t.Errorf("ResetTokenValid at expiry%+v: got %v, want %v", tt.at.Sub(exp), got, tt.want)
		}
	}
	v := issueToken(t, db, mail.EmailVerification, "u1", "ann@example.com", t0, time.Hour)
	if _, _, err := db.ResetPassword(ctx, r.tok.Hash, "new-hash", true, exp); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("ResetPassword at expiry: got %v, want ErrNotFound", err)
	}
	if _, _, err := db.VerifyEmail(ctx, v.tok.Hash, exp, nil); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("VerifyEmail at expiry: got %v, want ErrNotFound", err)
	}
	// Refused, and spent: neither works again even with a clock behind.
	wantCounts(t, db, map[string]int{"recovery_token": 0, "session": 1})
	if _, _, err := db.ResetPassword(ctx, r.tok.Hash, "new-hash", true, t0); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("ResetPassword of the refused token: got %v, want ErrNotFound", err)
	}
	if _, hash, err := db.CredentialByEmail(ctx, "ann@example.com"); err != nil || hash != "salt:hash" {
		t.Errorf("password after refused resets: got %q %v, want the old one", hash, err)
	}
	if u, err := db.UserByEmail(ctx, "ann@example.com"); err != nil || u.EmailVerified {
		t.Errorf("after a refused verification: got %+v %v, want unverified", u, err)
	}
}

// testResetPassword: a reset spends its token, sets the password, marks
// the address verified, deletes the user's other reset tokens (not its
// verification tokens) and, when asked, every session of the user and no
// one else's.
func testResetPassword(t *testing.T, _ *sqlstore.DB, e env) {
	ctx := context.Background()
	for _, revoke := range []bool{true, false} {
		t.Run(fmt.Sprint("revoke=", revoke), func(t *testing.T) {
			// A database of its own, with raw access to it.
			e := env{self: e.self, other: e.other, db: e.self.fresh(t)}
			db := e.db.mustOpen(t)
			mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
			mustCreateUser(t, db, "u2", "bob@example.com", t0, t0.Add(time.Hour))
			extra := issuer.Session{ID: "s-u1b", Token: "t-u1b", UserID: "u1", ExpiresAt: t0.Add(-time.Minute), CreatedAt: t0, UpdatedAt: t0}
			if err := db.CreateSession(ctx, extra); err != nil {
				t.Fatal(err)
			}
			r := issueToken(t, db, mail.PasswordReset, "u1", "ann@example.com", t0, time.Hour)
			v := issueToken(t, db, mail.EmailVerification, "u1", "ann@example.com", t0, time.Hour)
			bob := issueToken(t, db, mail.PasswordReset, "u2", "bob@example.com", t0, time.Hour)
			// A second reset token of u1, as IssueRecoveryToken never
			// leaves one (an older binary's, a copy's): the reset must
			// delete it too.
			_, other := newToken(t)
			rawExec(t, e, `INSERT INTO recovery_token (hash, kind, user_id, email, expires_at, created_at) VALUES (?, 'password_reset', 'u1', 'ann@example.com', ?, ?)`,
				other[:], t0.Add(time.Hour).UnixMilli(), t0.UnixMilli())

			now := t0.Add(10 * time.Minute)
			u, n, err := db.ResetPassword(ctx, r.tok.Hash, "new:hash", revoke, now)
			if err != nil {
				t.Fatalf("ResetPassword: %v", err)
			}
			want, _ := newUser("u1", "ann@example.com", t0)
			want.EmailVerified, want.UpdatedAt = true, now
			if !reflect.DeepEqual(u, want) {
				t.Errorf("user: got %+v, want %+v", u, want)
			}
			if got, err := db.UserByEmail(ctx, "ann@example.com"); err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("stored user: got %+v %v, want %+v", got, err, want)
			}
			wantRevoked, wantSessions := 0, 3
			if revoke {
				wantRevoked, wantSessions = 2, 1 // both of u1's, expired or not; bob's stays
			}
			if n.SessionsEnded != wantRevoked {
				t.Errorf("sessions revoked: got %d, want %d", n.SessionsEnded, wantRevoked)
			}
			wantCounts(t, db, map[string]int{"session": wantSessions, "account": 2})
			if _, _, err := db.SessionByToken(ctx, "t-u2"); err != nil {
				t.Errorf("bob's session: %v", err)
			}
			if _, _, err := db.SessionByToken(ctx, "t-u1"); errors.Is(err, issuer.ErrNotFound) != revoke {
				t.Errorf("ann's session after the reset: got %v, want gone: %v", err, revoke)
			}
			if _, hash, err := db.CredentialByEmail(ctx, "ann@example.com"); err != nil || hash != "new:hash" {
				t.Errorf("password: got %q %v, want the new hash", hash, err)
			}
			// Spent, with the user's other reset token; the verification
			// token and bob's token stay.
			if tokenValid(t, db, r.tok.Hash, now) || tokenValid(t, db, other, now) {
				t.Error("a reset token of u1 is still valid after the reset")
			}
			if !tokenValid(t, db, bob.tok.Hash, now) {
				t.Error("bob's reset token went with ann's reset")
			}
			if rawInt(t, e, `SELECT count(*) FROM recovery_token WHERE hash = ?`, v.tok.Hash[:]) != 1 {
				t.Error("ann's verification token went with the reset")
			}
			if _, _, err := db.ResetPassword(ctx, r.tok.Hash, "third:hash", revoke, now); !errors.Is(err, issuer.ErrNotFound) {
				t.Errorf("second use: got %v, want ErrNotFound", err)
			}
			if _, hash, _ := db.CredentialByEmail(ctx, "ann@example.com"); hash != "new:hash" {
				t.Errorf("password after the second use: got %q, want the first reset's", hash)
			}
		})
	}
}

// testResetPasswordCrossKind: a token spends only as its own kind, and a
// refusal leaves it valid for its own use.
func testResetPasswordCrossKind(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	r := issueToken(t, db, mail.PasswordReset, "u1", "ann@example.com", t0, time.Hour)
	v := issueToken(t, db, mail.EmailVerification, "u1", "ann@example.com", t0, time.Hour)
	_, unknown := newToken(t)
	if _, _, err := db.ResetPassword(ctx, v.tok.Hash, "x:y", true, t0); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("ResetPassword with a verification token: got %v, want ErrNotFound", err)
	}
	if _, _, err := db.VerifyEmail(ctx, r.tok.Hash, t0, nil); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("VerifyEmail with a reset token: got %v, want ErrNotFound", err)
	}
	if _, _, err := db.ResetPassword(ctx, unknown, "x:y", true, t0); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("ResetPassword with an unknown token: got %v, want ErrNotFound", err)
	}
	if _, _, err := db.VerifyEmail(ctx, unknown, t0, nil); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("VerifyEmail with an unknown token: got %v, want ErrNotFound", err)
	}
	wantCounts(t, db, map[string]int{"recovery_token": 2, "session": 1})
	if _, _, err := db.ResetPassword(ctx, r.tok.Hash, "x:y", true, t0); err != nil {
		t.Errorf("ResetPassword with its token after the refusals: %v", err)
	}
	if _, _, err := db.VerifyEmail(ctx, v.tok.Hash, t0, nil); err != nil {
		t.Errorf("VerifyEmail with its token after the refusals: %v", err)
	}
}

// testResetPasswordCreatesCredential: a user without a credential account
// (a social sign-in copied from Better Auth, its address verified by the
// provider) gets one, made as CreateUser makes it, and can then sign in
// with the password; the provider account stays (testProofUnlinks has
// the unverified case).
func testResetPasswordCreatesCredential(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	rawExec(t, e, `UPDATE "user" SET email_verified = true WHERE id = 'u1'`)
	rawExec(t, e, `DELETE FROM account WHERE user_id = 'u1'`)
	rawExec(t, e, `INSERT INTO account (id, account_id, provider_id, user_id, password, created_at, updated_at) VALUES ('gh1', '4242', 'github', 'u1', NULL, 0, 0)`)
	if _, _, err := db.CredentialByEmail(ctx, "ann@example.com"); !errors.Is(err, issuer.ErrNotFound) {
		t.Fatalf("before: got %v, want no credential", err)
	}
	r := issueToken(t, db, mail.PasswordReset, "u1", "ann@example.com", t0, time.Hour)
	now := t0.Add(time.Minute)
	if _, _, err := db.ResetPassword(ctx, r.tok.Hash, "new:hash", false, now); err != nil {
		t.Fatal(err)
	}
	if _, hash, err := db.CredentialByEmail(ctx, "ann@example.com"); err != nil || hash != "new:hash" {
		t.Errorf("credential: got %q %v, want the new hash", hash, err)
	}
	snap := mustExport(t, db)
	want := []issuer.Account{
		{ID: "cred_u1", AccountID: "u1", ProviderID: "credential", UserID: "u1", Password: ptr("new:hash"), CreatedAt: now, UpdatedAt: now},
		{ID: "gh1", AccountID: "4242", ProviderID: "github", UserID: "u1", CreatedAt: time.UnixMilli(0).UTC(), UpdatedAt: time.UnixMilli(0).UTC()},
	}
	if !reflect.DeepEqual(snap.Accounts, want) {
		t.Errorf("accounts: got %+v, want %+v", snap.Accounts, want)
	}
}

// testVerifyEmail: a verification marks the address verified once;
// wasVerified says whether it was already; the token's address must still
// be the user's, in any case.
func testVerifyEmail(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	v1 := issueToken(t, db, mail.EmailVerification, "u1", "ann@example.com", t0, time.Hour)
	now := t0.Add(time.Minute)
	u, proof, err := db.VerifyEmail(ctx, v1.tok.Hash, now, nil)
	want, _ := newUser("u1", "ann@example.com", t0)
	want.EmailVerified, want.UpdatedAt = true, now
	if err != nil || proof.WasVerified || !reflect.DeepEqual(u, want) {
		t.Fatalf("first verification: got %+v %v %v, want %+v, not verified before", u, proof.WasVerified, err, want)
	}
	if got, err := db.UserByEmail(ctx, "ann@example.com"); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("stored user: got %+v %v, want %+v", got, err, want)
	}
	if _, _, err := db.VerifyEmail(ctx, v1.tok.Hash, now, nil); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("second use: got %v, want ErrNotFound", err)
	}
	// Already verified: succeeds, says so, and changes nothing.
	v2 := issueToken(t, db, mail.EmailVerification, "u1", "ann@example.com", t0, time.Hour)
	if u, proof, err := db.VerifyEmail(ctx, v2.tok.Hash, now.Add(time.Minute), nil); err != nil || !proof.WasVerified || !reflect.DeepEqual(u, want) {
		t.Errorf("verified user: got %+v %v %v, want %+v, verified before", u, proof.WasVerified, err, want)
	}

	// The address is compared without case.
	mustCreateUser(t, db, "u2", "bob@example.com", t0, t0.Add(time.Hour))
	v3 := issueToken(t, db, mail.EmailVerification, "u2", "Bob@Example.COM", t0, time.Hour)
	if u, proof, err := db.VerifyEmail(ctx, v3.tok.Hash, now, nil); err != nil || proof.WasVerified || !u.EmailVerified {
		t.Errorf("address in another case: got %+v %v %v, want verified now", u, proof.WasVerified, err)
	}

	// The user's address changed since the mail: refused, the token
	// spent, nothing verified, even once the address changes back.
	mustCreateUser(t, db, "u3", "cy@example.com", t0, t0.Add(time.Hour))
	v4 := issueToken(t, db, mail.EmailVerification, "u3", "cy@example.com", t0, time.Hour)
	rawExec(t, e, `UPDATE "user" SET email = 'cy@example.org' WHERE id = 'u3'`)
	if _, _, err := db.VerifyEmail(ctx, v4.tok.Hash, now, nil); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("changed address: got %v, want ErrNotFound", err)
	}
	rawExec(t, e, `UPDATE "user" SET email = 'cy@example.com' WHERE id = 'u3'`)
	if _, _, err := db.VerifyEmail(ctx, v4.tok.Hash, now, nil); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("address changed back: got %v, want ErrNotFound", err)
	}
	if u, err := db.UserByEmail(ctx, "cy@example.com"); err != nil || u.EmailVerified {
		t.Errorf("after refused verifications: got %+v %v, want unverified", u, err)
	}
	// The user's other verification tokens go with a success.
	mustCreateUser(t, db, "u4", "di@example.com", t0, t0.Add(time.Hour))
	a := issueToken(t, db, mail.EmailVerification, "u4", "di@example.com", t0, time.Hour)
	_, b := newToken(t)
	rawExec(t, e, `INSERT INTO recovery_token (hash, kind, user_id, email, expires_at, created_at) VALUES (?, 'email_verification', 'u4', 'di@example.com', ?, ?)`,
		b[:], t0.Add(time.Hour).UnixMilli(), t0.UnixMilli())
	if _, _, err := db.VerifyEmail(ctx, a.tok.Hash, now, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.VerifyEmail(ctx, b, now, nil); !errors.Is(err, issuer.ErrNotFound) {
		t.Errorf("the user's other verification token: got %v, want ErrNotFound (deleted)", err)
	}
}

// testRecoveryTokenSingleUse: many requests spending one token at once,
// through two replicas, succeed exactly once; every other one is
// ErrNotFound, never another error (a deadlock, a serialization failure,
// SQLITE_BUSY).
func testRecoveryTokenSingleUse(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	handles := []*sqlstore.DB{db, e.replica(t)}
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	const n = 16
	tests := []struct {
		name  string
		kind  mail.Kind
		spend func(d *sqlstore.DB, hash [32]byte, i int) error
	}{
		{"ResetPassword", mail.PasswordReset, func(d *sqlstore.DB, hash [32]byte, i int) error {
			_, _, err := d.ResetPassword(ctx, hash, fmt.Sprint("hash-", i), i%2 == 0, t0)
			return err
		}},
		{"VerifyEmail", mail.EmailVerification, func(d *sqlstore.DB, hash [32]byte, _ int) error {
			_, _, err := d.VerifyEmail(ctx, hash, t0, nil)
			return err
		}},
	}
	for _, tt := range tests {
		r := issueToken(t, db, tt.kind, "u1", "ann@example.com", t0, time.Hour)
		start := make(chan struct{})
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				errs[i] = tt.spend(handles[i%2], r.tok.Hash, i)
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, issuer.ErrNotFound):
				t.Errorf("%s %d: got %v, want nil or ErrNotFound", tt.name, i, err)
			}
		}
		if won != 1 {
			t.Errorf("%s: %d of %d uses of one token succeeded, want 1", tt.name, won, n)
		}
	}
}

// testIssueRecoveryTokenConcurrent: reset requests for one user at once,
// through two replicas, leave exactly one valid token (each new token
// replaces the others) and queue every message.
func testIssueRecoveryTokenConcurrent(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	handles := []*sqlstore.DB{db, e.replica(t)}
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	const n = 16
	hashes := make([][32]byte, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		_, hashes[i] = newToken(t)
		wg.Go(func() {
			<-start
			errs[i] = handles[i%2].IssueRecoveryToken(ctx,
				issuer.RecoveryToken{Hash: hashes[i], Kind: mail.PasswordReset, UserID: "u1", Email: "ann@example.com", ExpiresAt: t0.Add(time.Hour), CreatedAt: t0},
				mail.Queued{ID: newMsgID(), Kind: mail.PasswordReset, Sealed: []byte("sealed"), CreatedAt: t0})
		})
	}
	close(start)
	wg.Wait()
	valid := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("issue %d: %v", i, errs[i])
		}
		if tokenValid(t, db, hashes[i], t0) {
			valid++
		}
	}
	if valid != 1 {
		t.Errorf("got %d valid tokens after %d concurrent requests, want 1", valid, n)
	}
	wantCounts(t, db, map[string]int{"recovery_token": 1, "outbox": n})
}

// testDeleteUserCascadesTokens: deleting a user deletes its tokens; its
// queued mail stays (it only carries a link that no longer works).
func testDeleteUserCascadesTokens(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	mustCreateUser(t, db, "u2", "bob@example.com", t0, t0.Add(time.Hour))
	r := issueToken(t, db, mail.PasswordReset, "u1", "ann@example.com", t0, time.Hour)
	issueToken(t, db, mail.EmailVerification, "u1", "ann@example.com", t0, time.Hour)
	bob := issueToken(t, db, mail.PasswordReset, "u2", "bob@example.com", t0, time.Hour)
	if _, err := db.DeleteUserByEmail(ctx, "ann@example.com", t0); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, db, map[string]int{"recovery_token": 1, "outbox": 3})
	if tokenValid(t, db, r.tok.Hash, t0) || !tokenValid(t, db, bob.tok.Hash, t0) {
		t.Error("after deleting ann: want her token gone and bob's valid")
	}
}

// testRecoveryTokenSweep: one issue in 256 also deletes every expired
// token, of any user; tokens still valid stay.
func testRecoveryTokenSweep(t *testing.T, db *sqlstore.DB, e env) {
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	mustCreateUser(t, db, "u2", "bob@example.com", t0, t0.Add(time.Hour))
	mustCreateUser(t, db, "u3", "cy@example.com", t0, t0.Add(time.Hour))
	old := issueToken(t, db, mail.PasswordReset, "u2", "bob@example.com", t0.Add(-2*time.Hour), time.Hour)
	live := issueToken(t, db, mail.EmailVerification, "u3", "cy@example.com", t0, 24*time.Hour)
	count := func(hash [32]byte) int {
		return rawInt(t, e, `SELECT count(*) FROM recovery_token WHERE hash = ?`, hash[:])
	}
	for i := 3; i < 256; i++ {
		issueToken(t, db, mail.PasswordReset, "u1", "ann@example.com", t0, time.Hour)
	}
	if count(old.tok.Hash) != 1 {
		t.Fatal("the expired token went before the 256th issue")
	}
	issueToken(t, db, mail.PasswordReset, "u1", "ann@example.com", t0, time.Hour)
	if got := count(old.tok.Hash); got != 0 {
		t.Errorf("after 256 issues: got %d expired tokens, want 0 (swept)", got)
	}
	if got := count(live.tok.Hash); got != 1 {
		t.Errorf("after the sweep: got %d live tokens, want 1", got)
	}
}

// testRecoveryConcurrentMix: issues, resets and verifications for one
// user at once, through two replicas, fail only as ErrNotFound (a
// replaced or spent token), never with a deadlock: every transaction
// takes the user's row before its tokens.
func testRecoveryConcurrentMix(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	handles := []*sqlstore.DB{db, e.replica(t)}
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	const workers, rounds = 6, 15
	hashes := make(chan [32]byte, workers*rounds*2)
	var mu sync.Mutex
	var errs []error
	var spent int
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range workers {
		h := handles[i%2]
		kind := []mail.Kind{mail.PasswordReset, mail.EmailVerification}[i/2%2]
		wg.Go(func() {
			<-start
			for range rounds {
				_, hash := newToken(t)
				err := h.IssueRecoveryToken(ctx,
					issuer.RecoveryToken{Hash: hash, Kind: kind, UserID: "u1", Email: "ann@example.com", ExpiresAt: t0.Add(time.Hour), CreatedAt: t0},
					mail.Queued{ID: newMsgID(), Kind: kind, Sealed: []byte("sealed"), CreatedAt: t0})
				if err == nil {
					hashes <- hash
				}
				// Spend a token someone issued, of either kind, as
				// whichever kind this worker is.
				var other [32]byte
				select {
				case other = <-hashes:
				default:
					other = hash
				}
				var spendErr error
				if kind == mail.PasswordReset {
					_, _, spendErr = h.ResetPassword(ctx, other, "h", true, t0)
				} else {
					_, _, spendErr = h.VerifyEmail(ctx, other, t0, nil)
				}
				mu.Lock()
				for _, err := range []error{err, spendErr} {
					if err != nil && !errors.Is(err, issuer.ErrNotFound) {
						errs = append(errs, err)
					}
				}
				if spendErr == nil {
					spent++
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		t.Errorf("got %v, want nil or ErrNotFound", err)
	}
	if spent == 0 {
		t.Error("no token was spent: the case tested nothing")
	}
	t.Logf("%d of %d spends succeeded", spent, workers*rounds)
}
