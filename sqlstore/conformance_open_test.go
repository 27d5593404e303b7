package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/mail"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// testOpenReopenKeepsData: closing and opening again runs no migration
// twice and keeps the data.
func testOpenReopenKeepsData(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	if err := db.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	u := issuer.User{ID: "u1", Name: "N", Email: "n@example.com", CreatedAt: t0, UpdatedAt: t0}
	s := issuer.Session{ID: "s1", Token: "t1", UserID: "u1", ExpiresAt: t0.Add(time.Hour), CreatedAt: t0, UpdatedAt: t0, Remember: true}
	if err := db.CreateUser(ctx, u, "salt:hash", s); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db2 := e.replica(t)
	gotS, gotU, err := db2.SessionByToken(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotU, u) || !reflect.DeepEqual(gotS, s) {
		t.Errorf("after reopen: got %+v %+v, want %+v %+v", gotS, gotU, s, u)
	}
	// A second user with the same email is refused and leaves nothing behind.
	u2 := u
	u2.ID = "u2"
	s2 := s
	s2.ID, s2.Token, s2.UserID = "s2", "t2", "u2"
	if err := db2.CreateUser(ctx, u2, "x:y", s2); !errors.Is(err, issuer.ErrEmailTaken) {
		t.Fatalf("duplicate email: got %v, want ErrEmailTaken", err)
	}
	wantCounts(t, db2, map[string]int{"user": 1, "account": 1, "session": 1})
}

// testOpenConcurrentlyOnEmpty: replicas started at the same moment on an
// empty database all come up, and every migration is applied exactly once.
func testOpenConcurrentlyOnEmpty(t *testing.T, _ *sqlstore.DB, e env) {
	d := e.self.fresh(t) // nothing has opened this one yet
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const replicas = 6
	start := make(chan struct{})
	errs := make([]error, replicas)
	dbs := make([]*sqlstore.DB, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() {
			<-start
			dbs[i], errs[i] = d.open(ctx)
		})
	}
	close(start)
	wg.Wait()
	for i, db := range dbs {
		if db != nil {
			t.Cleanup(func() { db.Close() })
		}
		if errs[i] != nil {
			t.Errorf("replica %d: %v", i, errs[i])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	for i, db := range dbs {
		if err := db.Ping(ctx); err != nil {
			t.Errorf("replica %d: ping: %v", i, err)
		}
	}

	before := schemaVersions(t, e.self.name, d)
	if want := migrationFiles(t, e.self.name); len(before) != len(want) {
		t.Fatalf("schema versions: got %q, want one per migration %q", before, want)
	}
	// Reopening applies nothing new.
	d.mustOpen(t)
	if after := schemaVersions(t, e.self.name, d); !reflect.DeepEqual(after, before) {
		t.Errorf("after reopening: got %q, want %q unchanged", after, before)
	}
}

// migrationFiles lists the engine's embedded migrations from the source
// tree.
func migrationFiles(t *testing.T, engine string) []string {
	t.Helper()
	ents, err := os.ReadDir("migrations/" + engine)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".sql") {
			out = append(out, e.Name())
		}
	}
	return out
}

// schemaVersions describes each applied migration. The engines record them
// differently on purpose: SQLite in PRAGMA user_version (as every file
// made before PostgreSQL support does), PostgreSQL in schema_migrations.
func schemaVersions(t *testing.T, engine string, d database) []string {
	t.Helper()
	raw := d.raw(t)
	var out []string
	switch engine {
	case "sqlite":
		var v int
		if err := raw.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= v; i++ {
			out = append(out, fmt.Sprint(i))
		}
	case "postgres":
		rows, err := raw.Query(`SELECT version, name, applied_at, count(*) OVER (PARTITION BY version) FROM schema_migrations ORDER BY version, applied_at`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var v, n int
			var name string
			var at time.Time
			if err := rows.Scan(&v, &name, &at, &n); err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Errorf("schema_migrations: version %d recorded %d times, want once", v, n)
			}
			if want := len(out) + 1; v != want {
				t.Errorf("schema_migrations: got version %d, want %d", v, want)
			}
			out = append(out, fmt.Sprint(v, " ", name, " ", at.UnixNano()))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown engine %q", engine)
	}
	return out
}

// testPingAndCount: Ping queries a table; Count takes only the store's
// tables, so no name can smuggle SQL in.
func testPingAndCount(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	wantCounts(t, db, empty())
	for _, name := range []string{"", "users", "USER", `user"; DROP TABLE "user`, "user; DROP TABLE user", "schema_migrations", "sqlite_master"} {
		if n, err := db.Count(ctx, name); err == nil || !strings.Contains(err.Error(), "unknown table") {
			t.Errorf("Count(%q): got %d %v, want an unknown table error", name, n, err)
		}
	}
	wantCounts(t, db, empty())
	if db.Engine() != e.self.name {
		t.Errorf("Engine: got %q, want %q", db.Engine(), e.self.name)
	}
	db.Close()
	if err := db.Ping(ctx); err == nil {
		t.Error("ping on a closed database: got nil, want an error")
	}
}

type ctxKey struct{}

// testObserve: the hook is called once per store operation, with the
// operation's context.
func testObserve(t *testing.T, db *sqlstore.DB, _ env) {
	var got []string
	db.Observe = func(ctx context.Context, op string) {
		if ctx.Value(ctxKey{}) != "marked" {
			t.Errorf("%s: observed without the request's context", op)
		}
		got = append(got, op)
	}
	ctx := context.WithValue(context.Background(), ctxKey{}, "marked")
	u := issuer.User{ID: "u1", Name: "N", Email: "n@example.com", CreatedAt: t0, UpdatedAt: t0}
	s := issuer.Session{ID: "s1", Token: "t1", UserID: "u1", ExpiresAt: t0.Add(time.Hour), CreatedAt: t0, UpdatedAt: t0}
	steps := []struct {
		op string
		do func() error
	}{
		{"create_user", func() error { return db.CreateUser(ctx, u, "h", s) }},
		{"session_by_token", func() error { _, _, err := db.SessionByToken(ctx, "t1"); return err }},
		{"credential_by_email", func() error { _, _, err := db.CredentialByEmail(ctx, u.Email); return err }},
		{"user_role", func() error { _, err := db.HasAnyRole(ctx, "u1", []string{"a", "b"}); return err }},
		{"take_token", func() error { _, err := db.TakeToken(ctx, "k", issuer.Rate{N: 1, Per: time.Minute}, t0); return err }},
		{"keys", func() error { _, err := db.Keys(ctx); return err }},
		{"issue_recovery_token", func() error {
			return db.IssueRecoveryToken(ctx,
				issuer.RecoveryToken{Kind: mail.PasswordReset, UserID: "u1", Email: u.Email, ExpiresAt: t0.Add(time.Hour), CreatedAt: t0},
				mail.Queued{ID: "msg_1", Kind: mail.PasswordReset, Sealed: []byte("sealed"), CreatedAt: t0})
		}},
		{"claim_outbox", func() error { _, err := db.ClaimOutbox(ctx, "w", 1, time.Minute, t0); return err }},
		{"export", func() error { _, err := db.Export(ctx); return err }},
		{"ping", func() error { return db.Ping(ctx) }},
	}
	for _, st := range steps {
		got = nil
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.op, err)
		}
		if len(got) != 1 || got[0] != st.op {
			t.Errorf("%s: observed %q, want exactly [%s]", st.op, got, st.op)
		}
	}
}

// testInspectChangesNothing: Inspect reports a database serve has not
// created yet without creating it, and an existing one with its version
// and keys; a second Inspect of the fresh database still finds nothing,
// so the first made nothing (the SQLite file, the PostgreSQL tables).
func testInspectChangesNothing(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	fresh := e.self.fresh(t)
	for i := range 2 {
		in, err := fresh.inspect(ctx)
		if err != nil || in.Exists || in.Version != 0 || in.Known < 2 || in.Pending() != in.Known || in.Keys != nil {
			t.Fatalf("fresh database, inspect %d: got %+v, %v; want nothing there, every migration pending", i+1, in, err)
		}
	}
	k := issuer.KeyRecord{ID: "k1", PublicKey: "pub", PrivateKey: "sealed", CreatedAt: t0, Alg: "EdDSA", Crv: "Ed25519"}
	if err := db.InsertKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	in, err := e.db.inspect(ctx)
	if err != nil || !in.Exists || in.Version != in.Known || in.Pending() != 0 || len(in.Keys) != 1 || in.Keys[0] != k {
		t.Fatalf("migrated database: got %+v, %v; want version %d and key k1", in, err, in.Known)
	}
	if in.Where != db.String() {
		t.Errorf("Where: got %q, want %q as DB.String", in.Where, db.String())
	}
}
