package issuer_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/idp"
	"github.com/authsidecar/authsidecar/internal/oidctest"
	"github.com/authsidecar/authsidecar/internal/pgtest"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// TestMain stops the throwaway PostgreSQL cluster a test started.
func TestMain(m *testing.M) { pgtest.Main(m) }

// TestSocialReplicasPostgres: two issuers (two replicas, each with its own
// store handle and providers) on one PostgreSQL database. A flow started
// on one finishes on the other; the state is spent for both; a second
// sign-in on either finds the same user.
func TestSocialReplicasPostgres(t *testing.T) {
	url := pgtest.URL(t)
	op := oidctest.StartOP(t, []string{testBase + "/api/auth/callback/corp"}, oidctest.Alice)
	replica := func() (*sqlstore.DB, *httptest.Server) {
		db, err := sqlstore.OpenPostgres(context.Background(), sqlstore.PostgresOptions{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		set, err := idp.NewSet([]idp.Config{{ID: "corp", Kind: idp.KindOIDC, Issuer: op.Issuer, ClientID: op.ClientID, ClientSecret: op.ClientSecret, SignUp: true, LinkByEmail: true}},
			idp.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(set.Close)
		iss, err := issuer.New(context.Background(), issuer.Options{Store: db, Secret: []byte(testSecret), BaseURL: testBase,
			PasswordCost: issuer.ScryptParams{N: 16, R: 1, P: 1}, Providers: set.Providers(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(iss)
		t.Cleanup(srv.Close)
		return db, srv
	}
	dbA, srvA := replica()
	_, srvB := replica()
	se := &socialEnv{op: op, env: &env{t: t, db: dbA, srv: srvA, clock: &clock{t: time.Now()}}}
	b := se.browser(t)
	cb := b.login(b.start(map[string]any{"provider": "corp", "callbackURL": "/dashboard", "errorCallbackURL": "/login-error"}), oidctest.Alice)
	se.srv = srvB // the load balancer sends the callback to the other replica
	if loc, code := location(t, b.callback(cb)); loc != "/dashboard" || code != "" {
		t.Fatalf("callback on replica B: got %q, want /dashboard", loc)
	}
	b.jwt()
	se.srv = srvA
	if _, code := location(t, b.callback(cb)); code != "state_mismatch" {
		t.Errorf("the same callback on replica A: got error %q, want state_mismatch (spent)", code)
	}
	if loc, _ := location(t, se.browser(t).flow("corp", oidctest.Alice, nil)); loc != "/dashboard" {
		t.Errorf("second sign-in on replica A: got %q, want the existing user (/dashboard)", loc)
	}
	if got := se.counts(); got != [3]int{1, 1, 2} {
		t.Errorf("got rows %v, want one user, one account, two sessions", got)
	}
}
