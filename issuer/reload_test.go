package issuer_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
)

// TestReload: the issuer Reload returns trusts the new origins and
// limits, shares the keys and sessions (a cookie from the old one works
// on the new), and leaves the old issuer exactly as it was.
func TestReload(t *testing.T) {
	e := newEnv(t, func(o *issuer.Options) {
		o.TrustedOrigins = []string{"https://old.example.com"}
		o.SignUpPerIP = issuer.Rate{N: 2, Per: time.Hour}
	})
	cookie, _ := e.signUp("rita@example.com", pw)
	next, err := e.iss.Reload(issuer.ReloadOptions{
		TrustedOrigins: []string{"https://new.example.com"},
		Limits:         issuer.Limits{SignUpPerIP: issuer.Rate{N: 100, Per: time.Hour}},
	})
	if err != nil {
		t.Fatal(err)
	}
	oldSrv := e.srv
	newSrv := httptest.NewServer(next)
	t.Cleanup(newSrv.Close)

	n := 0
	signUp := func(srv *httptest.Server, origin string) int {
		n++
		e.srv = srv
		defer func() { e.srv = oldSrv }()
		r := e.do(http.MethodPost, "/api/auth/sign-up/email", "application/json",
			fmt.Sprintf(`{"name":"X","email":"r%d@example.com","password":%q}`, n, pw), "Origin", origin)
		return r.status
	}
	tests := []struct {
		name   string
		srv    *httptest.Server
		origin string
		want   int
	}{
		{"new issuer, new origin", newSrv, "https://new.example.com", 200},
		{"new issuer, old origin", newSrv, "https://old.example.com", 403},
		{"new issuer, base URL origin", newSrv, "http://localhost:8080", 200},
		{"old issuer, new origin", oldSrv, "https://new.example.com", 403},
		// The old issuer's 2/h per IP: one sign-up above, this is the second.
		{"old issuer, old origin", oldSrv, "https://old.example.com", 200},
		{"old issuer, its limit reached", oldSrv, "https://old.example.com", 429},
		// The new issuer's own 100/h bucket: it has taken two so far.
		{"new issuer, its own limit", newSrv, "https://new.example.com", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := signUp(tt.srv, tt.origin); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}

	e.srv = newSrv
	r := e.getSession(cookie)
	e.srv = oldSrv
	if r.status != 200 || r.header.Get("Set-Auth-Jwt") == "" {
		t.Fatalf("old issuer's cookie on the reloaded one: got %d %s, want 200 with a JWT", r.status, r.body)
	}
	verifyJWT(t, e, r.header.Get("Set-Auth-Jwt"))
}
