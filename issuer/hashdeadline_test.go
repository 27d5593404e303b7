package issuer_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// slowCPUStore is the real store where the work before the password hash
// eats the request's deadline and the write after it takes 100ms: as on a
// host so loaded (or a container so throttled) that the hash itself
// outlasts the deadline. The write after the hash takes 1.2s, more than
// storeReserve but less than the request's budget, and honours its
// context, as a database driver does.
type slowCPUStore struct {
	*sqlstore.DB
}

// eat sleeps until ctx's deadline is 250ms away: room for the real read
// that follows on a loaded machine, far less than the 1.2s write after the
// hash needs.
func eat(ctx context.Context) {
	if dl, ok := ctx.Deadline(); ok {
		time.Sleep(time.Until(dl) - 250*time.Millisecond)
	}
}

func slowWrite(ctx context.Context) error {
	select {
	case <-time.After(1200 * time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s slowCPUStore) CredentialByEmail(ctx context.Context, email string) (issuer.User, string, error) {
	eat(ctx)
	return s.DB.CredentialByEmail(ctx, email)
}

func (s slowCPUStore) CreateUser(ctx context.Context, u issuer.User, hash string, ss issuer.Session) error {
	if err := slowWrite(ctx); err != nil {
		return err
	}
	return s.DB.CreateUser(ctx, u, hash, ss)
}

func (s slowCPUStore) CreateSession(ctx context.Context, ss issuer.Session) error {
	if err := slowWrite(ctx); err != nil {
		return err
	}
	return s.DB.CreateSession(ctx, ss)
}

// TestStoreWorkAfterHashOutlivesDeadline: the request deadline (the
// proxy's store timeout) bounds the wait for a hashing slot and the store,
// not the CPU a hash takes: the store work after a hash gets the whole
// budget again, so a slow hash does not turn a sign-up or a sign-in into a 503 "store
// unavailable" with the work thrown away (TestUsersCommands and
// TestKeysRotateRunning met that on a loaded machine).
func TestStoreWorkAfterHashOutlivesDeadline(t *testing.T) {
	e := newEnv(t)
	e.signUp("slow@example.com", pw)
	e.opts.Store = slowCPUStore{e.db}
	iss, err := issuer.New(context.Background(), e.opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second) // as the proxy does (5s), shorter
		defer cancel()
		iss.ServeHTTP(w, r.WithContext(ctx))
	}))
	t.Cleanup(srv.Close)
	e.srv = srv
	if r := e.postJSON("/api/auth/sign-up/email", map[string]any{"name": "N", "email": "slow2@example.com", "password": pw}); r.status != 200 {
		t.Errorf("sign-up with the deadline spent before the hash: got %d %s, want 200", r.status, r.body)
	}
	if r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "slow@example.com", "password": pw}); r.status != 200 {
		t.Errorf("sign-in with the deadline spent before the hash: got %d %s, want 200", r.status, r.body)
	}
}
