package sqlstore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/proxy"
	"github.com/authsidecar/authsidecar/revocation"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// issuerKeys is the sidecar's adapter of the issuer's keys to the proxy.
type issuerKeys struct{ iss *issuer.Issuer }

func (k issuerKeys) PublicKeys(ctx context.Context) ([]proxy.Key, error) {
	pks, err := k.iss.PublicKeys(ctx)
	out := make([]proxy.Key, len(pks))
	for i, pk := range pks {
		out[i] = proxy.Key{KID: pk.KID, Public: pk.Key}
	}
	return out, err
}

// testSweptRevocationStillRefused: the sweep deletes a revocation only
// once every token it covers has expired, so what it deletes refuses
// nothing the token's own exp does not. Real JWTs from the issuer over
// the store, verified as the proxy does (signature and exp, then the
// revocation set), on one clock:
//   - ann signs out at T0, bob twenty days later;
//   - at T0 + jwt_ttl + leeway - 1s ann's JWT is still within its exp
//     (with the leeway): the sweep keeps her revocation, and the JWT is
//     refused as revoked;
//   - a second past jwt_ttl + leeway the sweep deletes it: a replica
//     loading the store now does not hold it, and her JWT is refused all
//     the same, as expired; bob's, swept of nothing, is refused as
//     revoked.
func testSweptRevocationStillRefused(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	const (
		jwtTTL = 30 * 24 * time.Hour
		leeway = 30 * time.Second
		base   = "http://localhost:8080"
	)
	var clock atomic.Int64
	clock.Store(time.Now().Truncate(time.Second).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	advance := func(d time.Duration) { clock.Add(int64(d)) }
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	iss, err := issuer.New(ctx, issuer.Options{Store: db, Secret: []byte("sweep-test-secret-0123456789abcdefghijklmnop"), BaseURL: base,
		JWTTTL: jwtTTL, PasswordCost: issuer.ScryptParams{N: 16, R: 1, P: 1}, Logger: quiet, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(iss)
	defer srv.Close()
	call := func(method, path, body, cookie string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", base)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("%s %s: got %d, want 200", method, path, res.StatusCode)
		}
		return res
	}
	// signedOut signs a user up, takes a JWT and signs out: the JWT is
	// revoked with its session.
	signedOut := func(email string) string {
		res := call("POST", "/api/auth/sign-up/email", `{"name":"N","email":"`+email+`","password":"correct-horse-battery"}`, "")
		c := res.Cookies()[0]
		cookie := c.Name + "=" + c.Value
		jwt := call("GET", "/api/auth/get-session", "", cookie).Header.Get("Set-Auth-Jwt")
		call("POST", "/api/auth/sign-out", "{}", cookie)
		return jwt
	}
	ann := signedOut("ann@example.com")
	advance(20 * 24 * time.Hour)
	bob := signedOut("bob@example.com")

	keys := proxy.NewKeyCache(proxy.KeyCacheOptions{Source: issuerKeys{iss}})
	if err := keys.Load(ctx); err != nil {
		t.Fatal(err)
	}
	jv := proxy.NewJWTVerifier(proxy.JWTVerifierOptions{Keys: keys, Issuer: base, Audience: base, Leeway: leeway, MaxTTL: jwtTTL, Now: now})
	// judge is the proxy's check of a token: verified, then the set.
	judge := func(set *revocation.Set, jwt string) string {
		c, err := jv.Verify(ctx, jwt)
		var ae *proxy.AuthError
		switch {
		case errors.As(err, &ae):
			return ae.Reason
		case err != nil:
			t.Fatalf("verify: %v", err)
		}
		if err := set.Check(c.Revocation); errors.Is(err, revocation.ErrRevoked) {
			return proxy.ReasonRevoked
		} else if err != nil {
			t.Fatalf("check: %v", err)
		}
		return "ok"
	}
	// replica loads the store's revocations into a fresh set, as a
	// process starting now does.
	replica := func() *revocation.Set {
		set := revocation.NewSet(revocation.SetOptions{TTL: jwtTTL + leeway, Now: now})
		p := revocation.NewPoller(revocation.PollerOptions{Store: db, Set: set, Logger: quiet, Now: now})
		if err := p.Load(ctx); err != nil {
			t.Fatal(err)
		}
		return set
	}
	sweep := func() sqlstore.SweepResult {
		res, err := sweeper(t, db, now(), 0, jwtTTL+leeway, nil, nil).Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	// Ann's JWT within its exp and the leeway: her revocation stays.
	advance(jwtTTL - 20*24*time.Hour + leeway - time.Second)
	if res := sweep(); res.Removed[sqlstore.SweepRevocations] != 0 {
		t.Fatalf("a second before ann's JWT is past exp and leeway: got %d revocations swept, want 0", res.Removed[sqlstore.SweepRevocations])
	}
	set := replica()
	if got := judge(set, ann); got != proxy.ReasonRevoked {
		t.Errorf("ann's JWT, within exp and leeway: got %q, want %q", got, proxy.ReasonRevoked)
	}
	// Two seconds later, it is past them: the sweep takes her revocation.
	advance(2 * time.Second)
	if res := sweep(); res.Removed[sqlstore.SweepRevocations] != 1 {
		t.Fatalf("past ann's JWT's exp and leeway: got %d revocations swept, want 1", res.Removed[sqlstore.SweepRevocations])
	}
	set.Sweep() // a running process drops it on its own clock
	for name, s := range map[string]*revocation.Set{"the running process": set, "a replica loading now": replica()} {
		if s.Len() != 1 {
			t.Errorf("%s: holds %d revocations, want 1 (bob's)", name, s.Len())
		}
		if got := judge(s, ann); got != proxy.ReasonExpired {
			t.Errorf("%s, ann's JWT, its revocation swept: got %q, want %q", name, got, proxy.ReasonExpired)
		}
		if got := judge(s, bob); got != proxy.ReasonRevoked {
			t.Errorf("%s, bob's JWT, not swept: got %q, want %q", name, got, proxy.ReasonRevoked)
		}
	}
}
