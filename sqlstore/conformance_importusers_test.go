package sqlstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/importgen"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/passhash"
	"github.com/authsidecar/authsidecar/sqlstore"
	"github.com/authsidecar/authsidecar/userimport"
)

const importedHash = "$2a$04$XnIFEy0XpvRAwZhqPMn87OgvGMlkXlqEHolm23XVNafI142X9m7nq"

// importSetup stores ann (id 1, verified, password, role old), bob (id
// 2, no password) and an unclaimed cy (id 9).
func importSetup(t *testing.T, db *sqlstore.DB, e env) {
	t.Helper()
	mustCreateUser(t, db, "1", "ann@example.com", t0, t0.Add(time.Hour))
	mustCreateUser(t, db, "2", "bob@example.com", t0, t0.Add(time.Hour))
	mustCreateUser(t, db, "9", "cy@example.com", t0, t0.Add(time.Hour))
	rawExec(t, e, `UPDATE "user" SET email_verified = true WHERE id = '1'`)
	rawExec(t, e, `DELETE FROM account WHERE user_id = '2'`)
	rawExec(t, e, `UPDATE "user" SET email_unclaimed = true WHERE id = '9'`)
	if err := db.GrantRole(context.Background(), "1", "old"); err != nil {
		t.Fatal(err)
	}
}

func importBatch(t *testing.T, db *sqlstore.DB, batch []userimport.Record, o userimport.BatchOptions) []userimport.Outcome {
	t.Helper()
	res, err := db.ImportUsers(context.Background(), batch, o)
	if err != nil {
		t.Fatalf("ImportUsers: %v", err)
	}
	return res.Outcomes
}

func actions(outs []userimport.Outcome) []userimport.Action {
	var a []userimport.Action
	for _, o := range outs {
		a = append(a, o.Action)
	}
	return a
}

// conflictBatch is ann again (a new name, a password, a role), a new id
// with bob's email, and a new user with the address cy shows unclaimed.
func conflictBatch() []userimport.Record {
	return []userimport.Record{
		{Line: 1, ID: "1", Email: "ann@example.com", Name: "Ann Two", PasswordHash: importedHash, HashFormat: passhash.Bcrypt,
			Roles: []string{"editor"}, CreatedAt: t0, Given: userimport.FieldName | userimport.FieldPasswordHash | userimport.FieldRoles},
		{Line: 2, ID: "3", Email: "bob@example.com", CreatedAt: t0, Roles: []string{"editor"}, Given: userimport.FieldRoles},
		{Line: 3, ID: "4", Email: "cy@example.com", CreatedAt: t0},
	}
}

// testImportUsersConflicts: fail and skip write nothing of a line whose
// id or email exists; update writes the line over the user its id (or,
// without one, its email) names, and never changes an id. An address
// shown unclaimed reserves nothing.
func testImportUsersConflicts(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	now := t0.Add(time.Hour)
	importSetup(t, db, e)
	before := mustExport(t, db)
	// fail and skip, each on the same database: the new user is written
	// by the first, and then exists for the second.
	outs := importBatch(t, db, conflictBatch(), userimport.BatchOptions{OnConflict: userimport.Fail, Now: now})
	if got, want := actions(outs), []userimport.Action{userimport.Refused, userimport.Refused, userimport.Imported}; !slices.Equal(got, want) {
		t.Errorf("fail: got %v (%+v), want %v", got, outs, want)
	}
	if outs[0].Reason != "user 1 exists already with this email" || outs[1].Reason != "email exists already (user 2)" {
		t.Errorf("fail: reasons %q, %q", outs[0].Reason, outs[1].Reason)
	}
	after := mustExport(t, db)
	if !reflect.DeepEqual(after.Accounts, before.Accounts) || !reflect.DeepEqual(after.Roles, before.Roles) || len(after.Users) != len(before.Users)+1 {
		t.Errorf("fail: wrote more than the new user:\n before %+v\n after %+v", before, after)
	}
	if u, err := db.UserByEmail(ctx, "cy@example.com"); err != nil || u.ID != "4" {
		t.Errorf("the address cy showed unclaimed: got %+v %v, want user 4 claiming it", u, err)
	}
	outs = importBatch(t, db, conflictBatch(), userimport.BatchOptions{OnConflict: userimport.Skip, Now: now})
	if got, want := actions(outs), []userimport.Action{userimport.Skipped, userimport.Skipped, userimport.Skipped}; !slices.Equal(got, want) {
		t.Errorf("skip: got %v, want %v", got, want)
	}
	if again := mustExport(t, db); !reflect.DeepEqual(again, after) {
		t.Errorf("skip changed the database")
	}

	outs = importBatch(t, db, conflictBatch(), userimport.BatchOptions{OnConflict: userimport.Update, Now: now})
	if got, want := actions(outs), []userimport.Action{userimport.Updated, userimport.Refused, userimport.Updated}; !slices.Equal(got, want) {
		t.Errorf("update: got %v (%+v), want %v", got, outs, want)
	}
	if want := "email exists already (user 2): an update never changes a user's id"; outs[1].Reason != want {
		t.Errorf("update of bob's email under id 3: got %q, want %q", outs[1].Reason, want)
	}
	ann, err := db.UserByID(ctx, "1")
	if err != nil || ann.Name != "Ann Two" || !ann.EmailVerified || !ann.UpdatedAt.Equal(now) || !ann.CreatedAt.Equal(t0) {
		t.Errorf("ann after update: got %+v %v, want the new name, still verified, updated now", ann, err)
	}
	if _, hash, _ := db.CredentialByEmail(ctx, "ann@example.com"); hash != importedHash {
		t.Errorf("ann's password: got %q, want the imported hash", hash)
	}
	wantRoles(t, db, "ann@example.com", "editor", "old")
	wantRoles(t, db, "bob@example.com")

	// A line without an id updates the user its email names, and makes
	// the credential bob had none of; an id's user takes a new address,
	// unverified unless the line says it is.
	outs = importBatch(t, db, []userimport.Record{
		{Line: 1, ID: "Generated", GeneratedID: true, Email: "bob@example.com", PasswordHash: importedHash, Given: userimport.FieldPasswordHash},
		{Line: 2, ID: "1", Email: "ann@new.example.com", Roles: []string{"editor"}, Given: userimport.FieldRoles},
	}, userimport.BatchOptions{OnConflict: userimport.Update, Now: now})
	if got, want := actions(outs), []userimport.Action{userimport.Updated, userimport.Updated}; !slices.Equal(got, want) {
		t.Fatalf("update by email: got %v (%+v), want %v", got, outs, want)
	}
	if u, hash, err := db.CredentialByEmail(ctx, "bob@example.com"); err != nil || u.ID != "2" || hash != importedHash {
		t.Errorf("bob: got %s %q %v, want user 2 with the imported hash", u.ID, hash, err)
	}
	if u, err := db.UserByID(ctx, "1"); err != nil || u.Email != "ann@new.example.com" || u.EmailVerified || u.Name != "Ann Two" {
		t.Errorf("ann moved: got %+v %v, want the new address, unverified, the name kept", u, err)
	}
	if n, _ := db.Count(ctx, "user"); n != 4 {
		t.Errorf("users: got %d, want 4 (no update made a user)", n)
	}
}

func wantRoles(t *testing.T, db *sqlstore.DB, email string, roles ...string) {
	t.Helper()
	grants, err := db.RoleGrants(context.Background(), email)
	if err != nil {
		t.Fatalf("roles of %s: %v", email, err)
	}
	var got []string
	for _, g := range grants {
		got = append(got, g.Role)
	}
	if !slices.Equal(got, roles) {
		t.Errorf("roles of %s: got %q, want %q", email, got, roles)
	}
}

// testImportUsersDryRun: a dry run says what a real run then does, and
// writes nothing, in every conflict mode.
func testImportUsersDryRun(t *testing.T, db *sqlstore.DB, e env) {
	for _, mode := range []userimport.Conflict{userimport.Fail, userimport.Skip, userimport.Update} {
		fresh := e.self.fresh(t)
		d := fresh.mustOpen(t)
		importSetup(t, d, env{self: e.self, other: e.other, db: fresh})
		before := mustExport(t, d)
		dry, err := d.ImportUsers(context.Background(), conflictBatch(), userimport.BatchOptions{OnConflict: mode, DryRun: true, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if after := mustExport(t, d); !reflect.DeepEqual(after, before) {
			t.Errorf("%s: the dry run wrote:\n before %+v\n after %+v", mode, before, after)
		}
		real := importBatch(t, d, conflictBatch(), userimport.BatchOptions{OnConflict: mode, Now: t0})
		if !reflect.DeepEqual(dry.Outcomes, real) {
			t.Errorf("%s: dry run said %+v, the real run did %+v", mode, dry.Outcomes, real)
		}
	}
}

// testImportUsersRaced: a user written between the batch's lookup and
// its inserts (a sign-up while the sidecar serves) wins: the line is
// refused (skipped under skip), none of it written, the rest of the
// batch is.
func testImportUsersRaced(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	var ops []string
	db.Observe = func(_ context.Context, op string) { ops = append(ops, op) }
	restore := sqlstore.RaceImportForTest(`INSERT INTO "user" (id, name, email, email_verified, created_at, updated_at) VALUES ('racer', '', 'b@example.com', false, 0, 0)`)
	defer restore()
	batch := []userimport.Record{
		{Line: 1, ID: "a1", Email: "a@example.com", PasswordHash: importedHash, Roles: []string{"r"}, CreatedAt: t0},
		{Line: 2, ID: "b1", Email: "b@example.com", PasswordHash: importedHash, Roles: []string{"r"}, CreatedAt: t0},
	}
	res, err := db.ImportUsers(ctx, batch, userimport.BatchOptions{OnConflict: userimport.Fail, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	want := []userimport.Outcome{{Action: userimport.Imported}, {Action: userimport.Refused, Reason: "its id or email was registered while importing"}}
	if !reflect.DeepEqual(res.Outcomes, want) || res.RolesGranted != 1 {
		t.Errorf("got %+v, want %+v with 1 role granted", res, want)
	}
	if !slices.Equal(ops, []string{"import_users"}) {
		t.Errorf("observed %q, want exactly [import_users]", ops)
	}
	wantCounts(t, db, map[string]int{"user": 2, "account": 1, "user_role": 1})
	if u, err := db.UserByEmail(ctx, "b@example.com"); err != nil || u.ID != "racer" {
		t.Errorf("b@example.com: got %+v %v, want the racer", u, err)
	}
}

// testImportUsersWhileServing: sign-ups on a replica race an import of
// the same addresses; every address ends as exactly one user, made by
// one side or the other, whatever the engine.
func testImportUsersWhileServing(t *testing.T, db *sqlstore.DB, e env) {
	const n = 300
	var file strings.Builder
	for i := range n {
		fmt.Fprintf(&file, "{\"id\":\"i%d\",\"email\":\"user%d@example.com\",\"password_hash\":%q}\n", i, i, importedHash)
	}
	replica := e.replica(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	signedUp := 0
	// The sign-ups go from the last address down, the import from the
	// first up: it starts once a few sign-ups are in, and they meet
	// about the middle.
	started := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := n - 1; i >= 0; i -= 2 {
			if i == n-41 {
				close(started)
			}
			u := issuer.User{ID: "s" + strconv.Itoa(i), Email: fmt.Sprintf("user%d@example.com", i), CreatedAt: t0, UpdatedAt: t0}
			switch err := replica.CreateUser(ctx, u, "salt:hash", issuer.Session{}); {
			case err == nil:
				signedUp++
			case !errors.Is(err, issuer.ErrEmailTaken):
				t.Errorf("sign-up %d: %v", i, err)
			}
		}
	}()
	<-started
	sum, err := userimport.Run(ctx, strings.NewReader(file.String()), db, userimport.Options{OnConflict: userimport.Skip, BatchSize: 20})
	wg.Wait()
	if err != nil || sum.Refused != 0 || sum.Imported+sum.Skipped != n {
		t.Fatalf("import: got %+v %v, want every line imported or skipped", sum, err)
	}
	t.Logf("%s: %d imported, %d skipped, %d signed up", e.self.name, sum.Imported, sum.Skipped, signedUp)
	if sum.Imported+signedUp != n {
		t.Errorf("%d imported and %d signed up, want %d together", sum.Imported, signedUp, n)
	}
	snap := mustExport(t, db)
	emails := map[string]bool{}
	for _, u := range snap.Users {
		emails[u.Email] = true
	}
	if len(snap.Users) != n || len(emails) != n || len(snap.Accounts) != n {
		t.Errorf("got %d users, %d addresses, %d credentials; want %d of each", len(snap.Users), len(emails), len(snap.Accounts), n)
	}
}

// testImportUsersAtScale: the benchmark's file (importgen), a few
// thousand lines of every hash format, ids and none, roles: interrupted
// after a few batches, run again with skip, then every user is as its
// line says, once; a db copy to the other engine keeps them.
func testImportUsersAtScale(t *testing.T, db *sqlstore.DB, e env) {
	const n = 3000
	vectors, err := importgen.LoadVectors("../passhash/testdata", nil)
	if err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	if err := importgen.Write(&file, 0, n, vectors, e.self.name == "postgres"); err != nil {
		t.Fatal(err)
	}
	format := userimport.JSONL
	if e.self.name == "postgres" {
		format = userimport.CSV
	}
	o := userimport.Options{Format: format, AllowWeakHashes: true, BatchSize: 400}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	batches := 0
	o.Progress = func(userimport.Counts) {
		if batches++; batches == 3 {
			cancel()
		}
	}
	sum, err := userimport.Run(ctx, bytes.NewReader(file.Bytes()), db, o)
	if !errors.Is(err, context.Canceled) || sum.Imported != 1200 {
		t.Fatalf("interrupted run: got %+v %v, want 1200 imported, then canceled", sum, err)
	}
	o.Progress, o.OnConflict = nil, userimport.Skip
	sum, err = userimport.Run(context.Background(), bytes.NewReader(file.Bytes()), db, o)
	if err != nil || sum.Imported != n-1200 || sum.Skipped != 1200 || sum.Refused != 0 {
		t.Fatalf("re-run: got %+v %v, want %d imported, 1200 skipped", sum, err, n-1200)
	}
	check := func(db *sqlstore.DB) {
		t.Helper()
		ctx := context.Background()
		wantCounts(t, db, map[string]int{"user": n})
		for i := 0; i < n; i += 37 {
			want := importgen.Line(i, vectors)
			u, err := db.OperatorUserByEmail(ctx, want.Email)
			if err != nil || (want.ID != "" && u.ID != want.ID) || (want.ID == "" && len(u.ID) != 32) || u.Name != want.Name ||
				u.EmailVerified != want.EmailVerified || !u.CreatedAt.Equal(want.CreatedAt) {
				t.Errorf("%s line %d: got %+v %v, want %+v", db.Engine(), i, u, err, want)
				continue
			}
			_, hash, err := db.CredentialByEmail(ctx, want.Email)
			switch {
			case want.Vector == nil && !errors.Is(err, issuer.ErrNotFound):
				t.Errorf("%s line %d: got a credential (%v), want none", db.Engine(), i, err)
			case want.Vector != nil && hash != want.Vector.Hash:
				t.Errorf("%s line %d: got hash %q %v, want %q", db.Engine(), i, hash, err, want.Vector.Hash)
			}
			wantRoles(t, db, want.Email, want.Roles...)
		}
	}
	check(db)
	other := e.freshOther(t)
	if err := other.Import(context.Background(), mustExport(t, db)); err != nil {
		t.Fatalf("db copy to %s: %v", other.Engine(), err)
	}
	check(other)
}
