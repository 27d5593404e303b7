package issuer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/passhash"
)

// foreignVector is a password and its hash made by a real library of
// another system (passhash/testdata).
type foreignVector struct {
	format           passhash.Format
	password, stored string
}

// foreignVectors returns, for each foreign format, the first committed
// vector with a password that is not empty, at a test's cost (not one of
// the libraries' defaults).
func foreignVectors(t *testing.T) []foreignVector {
	t.Helper()
	var out []foreignVector
	for _, f := range passhash.Formats() {
		if f.Native() {
			continue // the env hashes its own at a test's cost: betterauth_test.go pins the real one
		}
		for _, v := range committedVectors(t, string(f)) {
			if v.Password != "" && !strings.Contains(v.MadeBy, "default") && !strings.Contains(v.MadeBy, ".NET 7+") {
				out = append(out, foreignVector{f, v.Password, v.Hash})
				break
			}
		}
	}
	return out
}

// committedVector is one of passhash's test vectors.
type committedVector struct {
	Password, Hash string
	MadeBy         string `json:"made_by"`
}

// committedVectors reads passhash/testdata/<format>.json.
func committedVectors(tb testing.TB, format string) []committedVector {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "passhash", "testdata", format+".json"))
	if err != nil {
		tb.Fatal(err)
	}
	var file struct{ Vectors []committedVector }
	if err := json.Unmarshal(b, &file); err != nil {
		tb.Fatal(err)
	}
	return file.Vectors
}

// withForeignHash signs up email and puts stored in place of its hash,
// as an import would have written it. It returns the user id.
func (e *env) withForeignHash(email, stored string) string {
	e.t.Helper()
	_, u := e.signUp(email, "placeholder password")
	id := u["id"].(string)
	if err := e.db.SetPassword(context.Background(), id, stored, e.clock.Now()); err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) storedHash(userID string) string {
	e.t.Helper()
	h, err := e.db.PasswordHash(context.Background(), userID)
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

func (e *env) signIn(email, password string) resp {
	e.t.Helper()
	return e.postJSON("/api/auth/sign-in/email", map[string]any{"email": email, "password": password})
}

// TestForeignHashSignIn: a user whose hash another system wrote signs in
// with the password they had there; a wrong one is refused and changes
// nothing; the first sign-in replaces the hash with the sidecar's own,
// with which the next sign-in goes on.
func TestForeignHashSignIn(t *testing.T) {
	e := newEnv(t)
	for _, v := range foreignVectors(t) {
		t.Run(string(v.format), func(t *testing.T) {
			email := string(v.format) + "@example.com"
			id := e.withForeignHash(email, v.stored)
			if r := e.signIn(email, "x"+v.password); r.status != http.StatusUnauthorized || r.code(t) != "INVALID_EMAIL_OR_PASSWORD" {
				t.Fatalf("wrong password: got %d %s, want 401 INVALID_EMAIL_OR_PASSWORD", r.status, r.body)
			}
			if got := e.storedHash(id); got != v.stored {
				t.Fatalf("a wrong password changed the stored hash to %q", got)
			}
			if r := e.signIn(email, v.password); r.status != http.StatusOK {
				t.Fatalf("right password: got %d %s, want 200", r.status, r.body)
			}
			upgraded := e.storedHash(id)
			h, err := passhash.Parse(upgraded, passhash.Options{})
			if err != nil || !h.Format().Native() {
				t.Fatalf("after the first sign-in: got a %v hash (%v), want the sidecar's own", h, err)
			}
			if r := e.signIn(email, v.password); r.status != http.StatusOK {
				t.Fatalf("sign-in after the upgrade: got %d %s, want 200", r.status, r.body)
			}
			if r := e.signIn(email, "x"+v.password); r.status != http.StatusUnauthorized {
				t.Fatalf("wrong password after the upgrade: got %d, want 401", r.status)
			}
			if got := e.storedHash(id); got != upgraded {
				t.Errorf("the second sign-in replaced the hash again")
			}
		})
	}
}

// TestForeignHashChangePassword: an endpoint that checks the current
// password (checkPassword) reads a foreign hash too.
func TestForeignHashChangePassword(t *testing.T) {
	e := newEnv(t)
	v := foreignVectors(t)[0]
	cookie, u := e.signUp("ann@example.com", "placeholder password")
	if err := e.db.SetPassword(context.Background(), u["id"].(string), v.stored, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	change := func(current string) resp {
		return e.postJSON("/api/auth/change-password", map[string]any{"currentPassword": current, "newPassword": "a brand new password"}, "Cookie", cookie, "Origin", testBase)
	}
	if r := change("x" + v.password); r.status != http.StatusBadRequest || r.code(t) != "INVALID_PASSWORD" {
		t.Fatalf("wrong current password: got %d %s, want 400 INVALID_PASSWORD", r.status, r.body)
	}
	if r := change(v.password); r.status != http.StatusOK {
		t.Fatalf("right current password (%s): got %d %s, want 200", v.format, r.status, r.body)
	}
	if r := e.signIn("ann@example.com", "a brand new password"); r.status != http.StatusOK {
		t.Fatalf("sign-in with the new password: got %d", r.status)
	}
}

// TestForeignHashConcurrentSignIns: sign-ins racing on one foreign hash
// all succeed; one of them upgraded it, to a hash of the password.
func TestForeignHashConcurrentSignIns(t *testing.T) {
	e := newEnv(t)
	v := foreignVectors(t)[0]
	id := e.withForeignHash("ann@example.com", v.stored)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if r := e.signIn("ann@example.com", v.password); r.status != http.StatusOK {
				t.Errorf("got %d %s, want 200", r.status, r.body)
			}
		})
	}
	wg.Wait()
	h, err := passhash.Parse(e.storedHash(id), passhash.Options{})
	if err != nil || !h.Format().Native() {
		t.Fatalf("got a %v hash (%v), want the sidecar's own", h, err)
	}
	if r := e.signIn("ann@example.com", v.password); r.status != http.StatusOK {
		t.Errorf("sign-in after the race: got %d", r.status)
	}
}

// TestRefusedStoredHash: a stored value passhash refuses (beyond the cost
// bounds, malformed, unknown) answers as a wrong password would, and the
// log says why, without the value.
func TestRefusedStoredHash(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	e := newEnv(t, func(o *issuer.Options) {
		o.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	})
	for i, stored := range []string{
		"$2b$16$XnIFEy0XpvRAwZhqPMn87OgvGMlkXlqEHolm23XVNafI142X9m7nq",
		"$argon2id$v=19$m=1048576,t=1,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA",
		"not a hash at all",
		"0123:abcd",
	} {
		email := string(rune('a'+i)) + "@example.com"
		e.withForeignHash(email, stored)
		if r := e.signIn(email, "correct horse battery staple"); r.status != http.StatusUnauthorized || r.code(t) != "INVALID_EMAIL_OR_PASSWORD" {
			t.Errorf("%q: got %d %s, want 401 INVALID_EMAIL_OR_PASSWORD", stored, r.status, r.body)
		}
		mu.Lock()
		out := logs.String()
		mu.Unlock()
		if !strings.Contains(out, "stored password hash refused") {
			t.Errorf("%q: no refusal in the log", stored)
		}
		if strings.Contains(out, stored) {
			t.Errorf("the log quotes the stored value %q", stored)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
