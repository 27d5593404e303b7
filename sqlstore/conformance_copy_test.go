package sqlstore_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/mail"
	"github.com/authsidecar/authsidecar/revocation"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// fill stores, through the store's own methods where it has one, one of
// every kind of row, and returns the snapshot Export must give back.
func fill(t *testing.T, db *sqlstore.DB, e env) issuer.Snapshot {
	t.Helper()
	ctx := context.Background()
	at := t0.Add(123 * time.Millisecond)
	img := "https://example.com/ann.png"
	ann := issuer.User{ID: "u1", Name: "Ann", Email: "ann@example.com", EmailVerified: true, Image: &img, CreatedAt: t0, UpdatedAt: at}
	bob := issuer.User{ID: "u2", Name: "Bob", Email: "bob@example.com", CreatedAt: at, UpdatedAt: at,
		Ban: issuer.Ban{Banned: true, Reason: "spam", Expires: at.Add(24 * time.Hour)}}
	annS := issuer.Session{ID: "s1", Token: "t1", UserID: "u1", ExpiresAt: t0.Add(time.Hour), CreatedAt: t0, UpdatedAt: t0, IPAddress: "2001:db8::1", UserAgent: "UA", Remember: true}
	bobS := issuer.Session{ID: "s2", Token: "t2", UserID: "u2", ExpiresAt: at.Add(time.Hour), CreatedAt: at, UpdatedAt: at}
	annS2 := issuer.Session{ID: "s3", Token: "t3", UserID: "u1", ExpiresAt: t0.Add(2 * time.Hour), CreatedAt: t0, UpdatedAt: t0, Remember: false}
	for _, c := range []struct {
		u issuer.User
		s issuer.Session
	}{{ann, annS}, {bob, bobS}} {
		if err := db.CreateUser(ctx, c.u, "hash-"+c.u.ID, c.s); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CreateSession(ctx, annS2); err != nil {
		t.Fatal(err)
	}
	k1 := key("k1", t0, t0.Add(time.Hour))
	k2 := key("k2", at, time.Time{})
	k2.Alg, k2.Crv = "EdDSA", "Ed25519"
	for _, k := range []issuer.KeyRecord{k1, k2} {
		if err := db.InsertKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []struct{ email, role string }{{"ann@example.com", "admin"}, {"ann@example.com", "ops"}, {"bob@example.com", "ops"}} {
		if _, err := db.GrantRoleByEmail(ctx, g.email, g.role, at); err != nil {
			t.Fatal(err)
		}
	}
	// An identity provider's account, with its sealed tokens (the store
	// moves them as bytes), and a sign-in flow under way.
	gh := issuer.Account{ID: "gh1", AccountID: "4242", ProviderID: "github", UserID: "u1",
		AccessToken: []byte("sealed-access"), RefreshToken: []byte("sealed-refresh"), IDToken: []byte("sealed-id"),
		AccessTokenExpiresAt: at.Add(time.Hour), RefreshTokenExpiresAt: at.Add(24 * time.Hour), Scope: "read:user,user:email",
		CreatedAt: t0, UpdatedAt: at}
	if err := db.LinkAccount(ctx, gh, issuer.Session{}); err != nil {
		t.Fatal(err)
	}
	flow := issuer.OAuthState{Hash: [32]byte{7, 7}, ProviderID: "corp", Sealed: []byte("sealed-flow"), ExpiresAt: at.Add(10 * time.Minute), CreatedAt: at}
	if err := db.SaveOAuthState(ctx, flow); err != nil {
		t.Fatal(err)
	}
	// Tokens and mail: a pending message that failed once (its payload
	// must move: the mail is not sent yet), a delivered and a dead one
	// (their record moves, without a payload).
	r1 := issueToken(t, db, mail.PasswordReset, "u1", "ann@example.com", t0, time.Hour)
	v2 := issueToken(t, db, mail.EmailVerification, "u2", "bob@example.com", at, 24*time.Hour)
	r2 := issueToken(t, db, mail.PasswordReset, "u2", "bob@example.com", at, time.Hour)
	if got := mustClaim(t, db, "w", 10, time.Minute, at); len(got) != 3 {
		t.Fatalf("claim: got %d rows, want 3", len(got))
	}
	if err := db.FailOutbox(ctx, r1.msg.ID, "w", at.Add(time.Minute), "dial tcp: i/o timeout", false, at.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := db.AckOutbox(ctx, v2.msg.ID, "w", at.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := db.FailOutbox(ctx, r2.msg.ID, "w", time.Time{}, "550 mailbox unavailable", true, at.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	// Revocations: everyone's, a session's, and a deleted user's (its
	// session's and its cutoff), ids 1 to 4.
	if err := db.RevokeAll(ctx, at); err != nil {
		t.Fatal(err)
	}
	gone := issuer.Session{ID: "s9", Token: "t9", UserID: "u1", ExpiresAt: at.Add(time.Hour), CreatedAt: at, UpdatedAt: at}
	if err := db.CreateSession(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EndSession(ctx, "t9", "", true, at.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	carl, carlS := newUser("u3", "carl@example.com", t0)
	if err := db.CreateUser(ctx, carl, "h", carlS); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteUser(ctx, "u3", at.Add(2*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	pending, delivered, dead := r1.msg, v2.msg, r2.msg
	pending.Attempts, pending.LastError, pending.NextAttemptAt = 1, "dial tcp: i/o timeout", at.Add(time.Minute)
	delivered.Sealed, delivered.State, delivered.Attempts, delivered.DeliveredAt = nil, "delivered", 1, at.Add(2*time.Second)
	dead.Sealed, dead.State, dead.Attempts, dead.LastError, dead.NextAttemptAt = nil, "dead", 1, "550 mailbox unavailable", at.Add(3*time.Second)
	return issuer.Snapshot{
		RecoveryTokens: []issuer.RecoveryToken{r1.tok, v2.tok, r2.tok},
		Outbox:         []mail.Queued{pending, delivered, dead},
		Users:          []issuer.User{ann, bob},
		Accounts: []issuer.Account{
			{ID: "cred_u1", AccountID: "u1", ProviderID: "credential", UserID: "u1", Password: ptr("hash-u1"), CreatedAt: t0, UpdatedAt: at},
			{ID: "cred_u2", AccountID: "u2", ProviderID: "credential", UserID: "u2", Password: ptr("hash-u2"), CreatedAt: at, UpdatedAt: at},
			gh,
		},
		OAuthStates: []issuer.OAuthState{flow},
		Sessions:    []issuer.Session{annS, bobS, annS2},
		Revocations: []revocation.Record{
			{ID: 1, Kind: revocation.KindAll, At: at},
			{ID: 2, Kind: revocation.KindSession, Subject: "s9", At: at.Add(time.Millisecond)},
			{ID: 3, Kind: revocation.KindSession, Subject: "s-u3", At: at.Add(2 * time.Millisecond)},
			{ID: 4, Kind: revocation.KindUser, Subject: "u3", At: at.Add(2 * time.Millisecond)},
		},
		Keys: []issuer.KeyRecord{k1, k2},
		Roles: []issuer.RoleGrant{
			{UserID: "u1", Email: "ann@example.com", Role: "admin", CreatedAt: at},
			{UserID: "u1", Email: "ann@example.com", Role: "ops", CreatedAt: at},
			{UserID: "u2", Email: "bob@example.com", Role: "ops", CreatedAt: at},
		},
	}
}

// normalize sorts a snapshot's rows by key: the order Export lists them in
// is no part of what a copy must preserve.
func normalize(s issuer.Snapshot) issuer.Snapshot {
	s.Users = append([]issuer.User(nil), s.Users...)
	s.Accounts = append([]issuer.Account(nil), s.Accounts...)
	s.Sessions = append([]issuer.Session(nil), s.Sessions...)
	s.Keys = append([]issuer.KeyRecord(nil), s.Keys...)
	s.Roles = append([]issuer.RoleGrant(nil), s.Roles...)
	sort.Slice(s.Users, func(i, j int) bool { return s.Users[i].ID < s.Users[j].ID })
	sort.Slice(s.Accounts, func(i, j int) bool { return s.Accounts[i].ID < s.Accounts[j].ID })
	sort.Slice(s.Sessions, func(i, j int) bool { return s.Sessions[i].ID < s.Sessions[j].ID })
	sort.Slice(s.Keys, func(i, j int) bool { return s.Keys[i].ID < s.Keys[j].ID })
	s.RecoveryTokens = append([]issuer.RecoveryToken(nil), s.RecoveryTokens...)
	s.Outbox = append([]mail.Queued(nil), s.Outbox...)
	sort.Slice(s.RecoveryTokens, func(i, j int) bool {
		return bytes.Compare(s.RecoveryTokens[i].Hash[:], s.RecoveryTokens[j].Hash[:]) < 0
	})
	sort.Slice(s.Outbox, func(i, j int) bool { return s.Outbox[i].ID < s.Outbox[j].ID })
	sort.Slice(s.Roles, func(i, j int) bool {
		a, b := s.Roles[i], s.Roles[j]
		return a.UserID < b.UserID || a.UserID == b.UserID && a.Role < b.Role
	})
	return s
}

func mustExport(t *testing.T, db *sqlstore.DB) issuer.Snapshot {
	t.Helper()
	snap, err := db.Export(context.Background())
	if err != nil {
		t.Fatalf("export from %s: %v", db.Engine(), err)
	}
	return normalize(snap)
}

// testExportImportRoundTrip: Export gives back every row as stored; a copy
// into an empty database of the other engine, and back into this engine,
// exports the same snapshot.
func testExportImportRoundTrip(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	want := normalize(fill(t, db, e))
	if got := mustExport(t, db); !reflect.DeepEqual(got, want) {
		t.Fatalf("export:\ngot  %+v\nwant %+v", got, want)
	}
	// Into this engine first: it needs no other server.
	same := e.freshSelf(t)
	if err := same.Import(ctx, want); err != nil {
		t.Fatalf("import into %s: %v", same.Engine(), err)
	}
	if got := mustExport(t, same); !reflect.DeepEqual(got, want) {
		t.Errorf("export of the %s copy:\ngot  %+v\nwant %+v", same.Engine(), got, want)
	}

	other := e.freshOther(t)
	if err := other.Import(ctx, mustExport(t, db)); err != nil {
		t.Fatalf("import into %s: %v", other.Engine(), err)
	}
	got := mustExport(t, other)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("export of the %s copy:\ngot  %+v\nwant %+v", other.Engine(), got, want)
	}
	// The copy works, not just exports: the store reads it back.
	if s, u, err := other.SessionByToken(ctx, "t1"); err != nil || !reflect.DeepEqual(u, want.Users[0]) || !reflect.DeepEqual(s, want.Sessions[0]) {
		t.Errorf("session in the %s copy: got %+v %+v %v", other.Engine(), s, u, err)
	}
	if ok, err := other.HasAnyRole(ctx, "u2", []string{"ops"}); err != nil || !ok {
		t.Errorf("role in the %s copy: got %v %v, want true", other.Engine(), ok, err)
	}
	// Revocations keep their ids, and the next one written takes the next
	// id: a poller's or a verifier's cursor from before the move holds.
	for _, d := range []*sqlstore.DB{same, other} {
		if err := d.RevokeAll(ctx, t0); err != nil {
			t.Fatal(err)
		}
		if got, err := d.RevocationsSince(ctx, 4, 10); err != nil || len(got) != 1 || got[0].ID != 5 {
			t.Errorf("a revocation after the import into %s: got %+v %v, want id 5", d.Engine(), got, err)
		}
	}
	// A link mailed before the move still works after it, and the mail
	// not yet delivered is delivered by the target, with its payload.
	for _, r := range want.RecoveryTokens {
		if ok, err := other.ResetTokenValid(ctx, r.Hash, t0); err != nil || ok != (r.Kind == mail.PasswordReset) {
			t.Errorf("%s token of %s in the %s copy: valid %v %v", r.Kind, r.UserID, other.Engine(), ok, err)
		}
	}
	var pending mail.Queued
	for _, q := range want.Outbox {
		if q.State == "pending" {
			pending = q
		}
	}
	pending.Attempts++ // the claim's
	if got, err := other.ClaimOutbox(ctx, "target", 10, time.Minute, pending.NextAttemptAt); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], pending) {
		t.Errorf("claim in the %s copy: got %+v %v, want [%+v]", other.Engine(), got, err, pending)
	}
}

// testImportRefusesNonEmpty: Import into a database holding any user,
// session, key, role or outbox row is ErrNotEmpty and changes nothing.
func testImportRefusesNonEmpty(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	snap := fill(t, db, e)
	tests := []struct {
		name string
		prep func(*sqlstore.DB) error
	}{
		{"a user", func(d *sqlstore.DB) error {
			u, s := newUser("x", "x@example.com", t0)
			return d.CreateUser(ctx, u, "h", s)
		}},
		{"only a key", func(d *sqlstore.DB) error { return d.InsertKey(ctx, key("kx", t0, time.Time{})) }},
		// Queued mail outlives its user: a target holding only that is
		// not empty either.
		{"only an outbox row", func(d *sqlstore.DB) error {
			u, s := newUser("x", "x@example.com", t0)
			if err := d.CreateUser(ctx, u, "h", s); err != nil {
				return err
			}
			issueToken(t, d, mail.PasswordReset, "x", "x@example.com", t0, time.Hour)
			_, err := d.DeleteUserByEmail(ctx, "x@example.com", t0)
			return err
		}},
		{"only a revocation", func(d *sqlstore.DB) error { return d.RevokeAll(ctx, t0) }},
	}
	for _, tt := range tests {
		target := e.freshSelf(t)
		if err := tt.prep(target); err != nil {
			t.Fatal(err)
		}
		before := mustExport(t, target)
		if err := target.Import(ctx, snap); !errors.Is(err, sqlstore.ErrNotEmpty) {
			t.Errorf("%s: got %v, want ErrNotEmpty", tt.name, err)
		}
		if after := mustExport(t, target); !reflect.DeepEqual(after, before) {
			t.Errorf("%s: refused import changed the target:\ngot  %+v\nwant %+v", tt.name, after, before)
		}
	}
	// The source itself, full of rows.
	before := mustExport(t, db)
	if err := db.Import(ctx, issuer.Snapshot{}); !errors.Is(err, sqlstore.ErrNotEmpty) {
		t.Errorf("full database: got %v, want ErrNotEmpty", err)
	}
	if after := mustExport(t, db); !reflect.DeepEqual(after, before) {
		t.Error("refused import changed the full database")
	}
	// Rate-limit buckets are no part of a copy: a target holding only
	// those is empty.
	target := e.freshSelf(t)
	if _, err := target.TakeToken(ctx, "k", issuer.Rate{N: 1, Per: time.Minute}, t0); err != nil {
		t.Fatal(err)
	}
	if err := target.Import(ctx, snap); err != nil {
		t.Errorf("target with only rate-limit buckets: got %v, want nil", err)
	}
}

// testImportIsAllOrNothing: a snapshot with one bad row leaves the target
// as empty as it was (one transaction), and the target takes a good
// snapshot afterwards.
func testImportIsAllOrNothing(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	good := fill(t, db, e)
	tests := []struct {
		name    string
		corrupt func(s *issuer.Snapshot)
	}{
		{"session of a missing user", func(s *issuer.Snapshot) {
			s.Sessions = append(s.Sessions, issuer.Session{ID: "sx", Token: "tx", UserID: "missing", ExpiresAt: t0, CreatedAt: t0, UpdatedAt: t0})
		}},
		{"duplicate user id", func(s *issuer.Snapshot) {
			s.Users = append(s.Users, issuer.User{ID: "u1", Name: "Dup", Email: "dup@example.com", CreatedAt: t0, UpdatedAt: t0})
		}},
		{"duplicate email", func(s *issuer.Snapshot) {
			s.Users = append(s.Users, issuer.User{ID: "u9", Name: "Dup", Email: "ann@example.com", CreatedAt: t0, UpdatedAt: t0})
		}},
		{"account of a missing user", func(s *issuer.Snapshot) {
			s.Accounts = append(s.Accounts, issuer.Account{ID: "ax", AccountID: "1", ProviderID: "github", UserID: "missing", CreatedAt: t0, UpdatedAt: t0})
		}},
		{"duplicate session token", func(s *issuer.Snapshot) {
			dup := s.Sessions[0]
			dup.ID = "sy"
			s.Sessions = append(s.Sessions, dup)
		}},
		{"duplicate key id", func(s *issuer.Snapshot) { s.Keys = append(s.Keys, s.Keys[0]) }},
		{"role of a missing user", func(s *issuer.Snapshot) {
			s.Roles = append(s.Roles, issuer.RoleGrant{UserID: "missing", Role: "admin", CreatedAt: t0})
		}},
		{"duplicate role", func(s *issuer.Snapshot) { s.Roles = append(s.Roles, s.Roles[0]) }},
		{"token of a missing user", func(s *issuer.Snapshot) {
			r := s.RecoveryTokens[0]
			r.Hash[0] ^= 0xff
			r.UserID = "missing"
			s.RecoveryTokens = append(s.RecoveryTokens, r)
		}},
		{"duplicate token", func(s *issuer.Snapshot) { s.RecoveryTokens = append(s.RecoveryTokens, s.RecoveryTokens[0]) }},
		{"duplicate outbox id", func(s *issuer.Snapshot) { s.Outbox = append(s.Outbox, s.Outbox[0]) }},
		{"duplicate revocation id", func(s *issuer.Snapshot) { s.Revocations = append(s.Revocations, s.Revocations[0]) }},
		// The schema keeps a payload only while a row is pending.
		{"delivered row with a payload", func(s *issuer.Snapshot) {
			s.Outbox = append(s.Outbox, mail.Queued{ID: "msg_x", Kind: mail.PasswordReset, Sealed: []byte("sealed"), State: "delivered", CreatedAt: t0, NextAttemptAt: t0, DeliveredAt: t0})
		}},
		{"unknown outbox state", func(s *issuer.Snapshot) {
			s.Outbox = append(s.Outbox, mail.Queued{ID: "msg_y", Kind: mail.PasswordReset, Sealed: []byte("sealed"), State: "sent", CreatedAt: t0, NextAttemptAt: t0})
		}},
	}
	for _, tt := range tests {
		snap := normalize(good) // a deep enough copy: corrupt only appends
		tt.corrupt(&snap)
		target := e.freshSelf(t)
		err := target.Import(ctx, snap)
		if err == nil || errors.Is(err, sqlstore.ErrNotEmpty) {
			t.Errorf("%s: got %v, want an import error", tt.name, err)
		}
		wantCounts(t, target, empty())
		if err := target.Import(ctx, good); err != nil {
			t.Errorf("%s: a good import after the failed one: %v", tt.name, err)
		}
	}
}
