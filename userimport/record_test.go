package userimport_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/userimport"
)

// TestRecordWritten: a line with every field becomes exactly that user,
// credential and roles; a line with only an email gets a generated id,
// the import's instant, and no credential (it signs in after a reset, or
// with an identity provider).
func TestRecordWritten(t *testing.T) {
	db := openStore(t)
	r := importText(t, db, lines(
		`{"id":"u-1","email":"Ann@Example.COM","name":"Ann Doe","email_verified":true,"image":"https://img.example.com/a.png",`+
			`"created_at":"2021-03-04T05:06:07.891234+02:00","password_hash":"`+bcryptHash+`","roles":["admin","ops"]}`,
		`{"email":"bob@example.com"}`,
		`{"id":7,"email":"cy@example.com","created_at":1614827167891}`,
	), userimport.Options{})
	if r.err != nil || r.sum.Imported != 3 || r.sum.NoPassword != 2 || r.sum.RolesGranted != 2 {
		t.Fatalf("got %v, want 3 imported, 2 without a password, 2 roles", r)
	}
	ctx := context.Background()
	snap, err := db.Export(ctx)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2021, 3, 4, 3, 6, 7, 891_000_000, time.UTC)
	if len(snap.Users) != 3 {
		t.Fatalf("got users %+v, want 3", snap.Users)
	}
	byEmail := map[string]issuer.User{}
	for _, u := range snap.Users {
		byEmail[u.Email] = u
	}
	want := issuer.User{ID: "u-1", Name: "Ann Doe", Email: "ann@example.com", EmailVerified: true,
		Image: ptr("https://img.example.com/a.png"), CreatedAt: created, UpdatedAt: t0}
	if got := byEmail["ann@example.com"]; !reflect.DeepEqual(got, want) {
		t.Errorf("ann:\n got %+v\nwant %+v", got, want)
	}
	bob := byEmail["bob@example.com"]
	if !issuer.ValidUserID(bob.ID) || len(bob.ID) != 32 || bob.Name != "" || bob.EmailVerified || !bob.CreatedAt.Equal(t0) {
		t.Errorf("bob: got %+v, want a generated id, no name, unverified, created at the import", bob)
	}
	if cy := byEmail["cy@example.com"]; cy.ID != "7" || !cy.CreatedAt.Equal(created) {
		t.Errorf("cy: got %+v, want id 7, created at Unix ms 1614827167891", cy)
	}
	wantAccounts := []issuer.Account{{ID: "cred_u-1", AccountID: "u-1", ProviderID: "credential", UserID: "u-1",
		Password: ptr(bcryptHash), CreatedAt: created, UpdatedAt: t0}}
	if !reflect.DeepEqual(snap.Accounts, wantAccounts) {
		t.Errorf("accounts:\n got %+v\nwant %+v", snap.Accounts, wantAccounts)
	}
	wantRoles := []issuer.RoleGrant{{UserID: "u-1", Email: "ann@example.com", Role: "admin", CreatedAt: t0},
		{UserID: "u-1", Email: "ann@example.com", Role: "ops", CreatedAt: t0}}
	if !reflect.DeepEqual(snap.Roles, wantRoles) {
		t.Errorf("roles:\n got %+v\nwant %+v", snap.Roles, wantRoles)
	}
	// Sign-in finds ann's credential with the hash as given; bob has none.
	if _, hash, err := db.CredentialByEmail(ctx, "ann@example.com"); err != nil || hash != bcryptHash {
		t.Errorf("ann's credential: got %q %v", hash, err)
	}
	if _, _, err := db.CredentialByEmail(ctx, "bob@example.com"); err != issuer.ErrNotFound {
		t.Errorf("bob's credential: got %v, want ErrNotFound", err)
	}
}

func ptr[T any](v T) *T { return &v }
