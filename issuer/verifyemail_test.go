package issuer_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// faultStore is the real store with session writes and reads that fail
// on demand: the failures verify-email must survive.
type faultStore struct {
	*sqlstore.DB
	fail atomic.Bool
}

var errInjected = errors.New("injected store failure")

func (f *faultStore) CreateSession(ctx context.Context, s issuer.Session) error {
	if f.fail.Load() {
		return errInjected
	}
	return f.DB.CreateSession(ctx, s)
}

func (f *faultStore) SessionByToken(ctx context.Context, token string) (issuer.Session, issuer.User, error) {
	if f.fail.Load() {
		return issuer.Session{}, issuer.User{}, errInjected
	}
	return f.DB.SessionByToken(ctx, token)
}

// A verification link that fails while signing the user in must not be
// spent by the failure: either the whole of it happens (address verified,
// session created) or the link still works once the store does.
func TestVerifyEmailFailureKeepsLink(t *testing.T) {
	for _, withCookie := range []bool{false, true} {
		t.Run(fmt.Sprint("cookie=", withCookie), func(t *testing.T) {
			e, rec := newRecoveryEnv(t)
			fs := &faultStore{DB: e.db}
			e.opts.Store = fs
			// The failure that matters is the sign-in's: with the option
			// off (the default) the link creates no session at all.
			e.opts.Recovery.SignInAfterVerification = true
			iss, err := issuer.New(context.Background(), e.opts)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(iss)
			t.Cleanup(srv.Close)
			e.srv = srv
			cookie, _ := e.signUp("carol@example.com", "password-1")
			if r := e.postJSON("/api/auth/send-verification-email", map[string]any{"email": "carol@example.com"}, "Cookie", cookie, "Origin", "http://localhost:8080"); r.status != 200 {
				t.Fatalf("send-verification-email: got %d %s", r.status, r.body)
			}
			tok, _ := verifyToken(t, rec, "carol@example.com")
			var hdr []string
			if withCookie {
				hdr = []string{"Cookie", cookie}
			}
			fs.fail.Store(true)
			first := e.do("GET", "/api/auth/verify-email?token="+tok, "", "", hdr...)
			fs.fail.Store(false)
			if first.status == 200 {
				if c := first.cookie("auth.session_token"); c == nil {
					t.Fatalf("verified without a session cookie: %v", first.header)
				}
				return // all of it happened
			}
			if first.status != 503 {
				t.Fatalf("verify under failing session writes: got %d %s, want 200 or 503", first.status, first.body)
			}
			r := e.do("GET", "/api/auth/verify-email?token="+tok, "", "", hdr...)
			if r.status != 200 || r.cookie("auth.session_token") == nil {
				t.Fatalf("the link after a failed verification: got %d %s, want 200 and a session: the failure spent it", r.status, r.body)
			}
		})
	}
}
