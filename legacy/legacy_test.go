package legacy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
)

const (
	secret   = "legacy-secret-0123456789"
	password = "the password: hunter2"
)

// TestSignIn: what the legacy application answers becomes a user, a
// refusal or one of the two failures, and the request carries the
// secret and exactly the email and password.
func TestSignIn(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   issuer.LegacyUser
		err    error
	}{
		{"user", 200, `{"id":"u-1","email":"Ann@Example.com","name":"Ann","email_verified":true,"roles":["admin","ops"],"plan":"gold"}`,
			issuer.LegacyUser{ID: "u-1", Email: "Ann@Example.com", Name: "Ann", EmailVerified: true, Roles: []string{"admin", "ops"}}, nil},
		{"integer id", 200, `{"id":42,"email":"ann@example.com"}`, issuer.LegacyUser{ID: "42", Email: "ann@example.com"}, nil},
		{"nulls", 200, `{"id":"7","email":"ann@example.com","name":null,"email_verified":null,"roles":null}`,
			issuer.LegacyUser{ID: "7", Email: "ann@example.com"}, nil},
		{"unauthorized", 401, `{"error":"bad password"}`, issuer.LegacyUser{}, issuer.ErrLegacyRefused},
		{"not found", 404, ``, issuer.LegacyUser{}, issuer.ErrLegacyRefused},
		{"server error", 500, `{"id":"u-1"}`, issuer.LegacyUser{}, issuer.ErrLegacyUnavailable},
		{"bad gateway", 502, ``, issuer.LegacyUser{}, issuer.ErrLegacyUnavailable},
		{"forbidden", 403, ``, issuer.LegacyUser{}, issuer.ErrLegacyUnavailable},
		{"too many", 429, ``, issuer.LegacyUser{}, issuer.ErrLegacyUnavailable},
		{"created", 201, `{"id":"u-1","email":"ann@example.com"}`, issuer.LegacyUser{}, issuer.ErrLegacyUnavailable},
		{"garbage", 200, `<html>welcome</html>`, issuer.LegacyUser{}, issuer.ErrLegacyInvalid},
		{"empty", 200, ``, issuer.LegacyUser{}, issuer.ErrLegacyInvalid},
		{"a list", 200, `[{"id":"u-1"}]`, issuer.LegacyUser{}, issuer.ErrLegacyInvalid},
		{"two objects", 200, `{"id":"u-1"}{"id":"u-2"}`, issuer.LegacyUser{}, issuer.ErrLegacyInvalid},
		{"repeated id", 200, `{"id":"u-1","email":"ann@example.com","id":"admin"}`, issuer.LegacyUser{}, issuer.ErrLegacyInvalid},
		{"fractional id", 200, `{"id":4.2,"email":"ann@example.com"}`, issuer.LegacyUser{}, issuer.ErrLegacyInvalid},
		{"exponent id", 200, `{"id":1e3,"email":"ann@example.com"}`, issuer.LegacyUser{}, issuer.ErrLegacyInvalid},
		{"object id", 200, `{"id":{"$oid":"x"},"email":"ann@example.com"}`, issuer.LegacyUser{}, issuer.ErrLegacyInvalid},
		{"verified as text", 200, `{"id":"u-1","email":"ann@example.com","email_verified":"yes"}`, issuer.LegacyUser{}, issuer.ErrLegacyInvalid},
		{"roles as text", 200, `{"id":"u-1","email":"ann@example.com","roles":"admin"}`, issuer.LegacyUser{}, issuer.ErrLegacyInvalid},
		{"not UTF-8", 200, "{\"id\":\"u-1\",\"email\":\"ann@example.com\",\"name\":\"\xff\"}", issuer.LegacyUser{}, issuer.ErrLegacyInvalid},
		// "ID" is not "id": encoding/json would read it as the id.
		{"id in another case", 200, `{"ID":"admin","email":"ann@example.com"}`, issuer.LegacyUser{Email: "ann@example.com"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got struct {
				auth, ctype string
				body        map[string]string
			}
			app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got.auth, got.ctype = r.Header.Get("Authorization"), r.Header.Get("Content-Type")
				json.NewDecoder(r.Body).Decode(&got.body)
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer app.Close()
			c := mustNew(t, Options{URL: app.URL + "/signin", Secret: secret})
			u, err := c.SignIn(context.Background(), "ann@example.com", password)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("got error %v, want %v", err, tt.err)
			}
			if !reflect.DeepEqual(u, tt.want) {
				t.Errorf("got %+v, want %+v", u, tt.want)
			}
			wantBody := map[string]string{"email": "ann@example.com", "password": password}
			if got.auth != "Bearer "+secret || got.ctype != "application/json" || !reflect.DeepEqual(got.body, wantBody) {
				t.Errorf("the application got Authorization %q, Content-Type %q, body %v; want the secret, JSON, %v", got.auth, got.ctype, got.body, wantBody)
			}
			noSecrets(t, err)
		})
	}
}

// TestSignInBounds: an answer too large, too slow or redirected is a
// failure, never a user; a redirect is not followed.
func TestSignInBounds(t *testing.T) {
	var followed atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		followed.Add(1)
		io.WriteString(w, `{"id":"u-1","email":"ann@example.com"}`)
	}))
	defer elsewhere.Close()
	// A handler that never answers waits until the client gives up (the
	// server sees the connection close once the body has been read).
	hang := func(r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}
	user := `{"id":"u-1","email":"ann@example.com","name":"` + strings.Repeat("a", 1000) + `"}`
	tests := []struct {
		name    string
		handler http.HandlerFunc
		err     error
	}{
		{"at the bound", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, user+strings.Repeat(" ", 2048-len(user)))
		}, nil},
		{"a byte over", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, user+strings.Repeat(" ", 2049-len(user)))
		}, issuer.ErrLegacyInvalid},
		{"ten megabytes", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"id":"u-1","name":"`)
			for range 10 << 10 {
				w.Write([]byte(strings.Repeat("a", 1<<10)))
			}
		}, issuer.ErrLegacyInvalid},
		{"no answer", func(w http.ResponseWriter, r *http.Request) { hang(r) }, issuer.ErrLegacyUnavailable},
		{"a body that stops", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"id":"u-1",`)
			w.(http.Flusher).Flush()
			hang(r)
		}, issuer.ErrLegacyUnavailable},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL, http.StatusTemporaryRedirect)
		}, issuer.ErrLegacyUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := httptest.NewServer(tt.handler)
			defer app.Close()
			c := mustNew(t, Options{URL: app.URL, Secret: secret, Timeout: 300 * time.Millisecond, MaxBodyBytes: 2048})
			_, err := c.SignIn(context.Background(), "ann@example.com", password)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Errorf("got %v, want %v", err, tt.err)
			}
			noSecrets(t, err)
		})
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests, want 0", n)
	}
	// The caller's deadline bounds the call too.
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hang(r) }))
	defer app.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := mustNew(t, Options{URL: app.URL, Secret: secret}).SignIn(ctx, "ann@example.com", password); !errors.Is(err, issuer.ErrLegacyUnavailable) {
		t.Errorf("past the caller's deadline: got %v, want ErrLegacyUnavailable", err)
	}
}

// TestNew: passwords go over https, or plain http only to this machine.
func TestNew(t *testing.T) {
	tests := []struct {
		url, secret string
		ok          bool
	}{
		{"https://legacy.example.com/api/signin", secret, true},
		{"http://127.0.0.1:3000/signin", secret, true},
		{"http://[::1]:3000/signin", secret, true},
		{"http://localhost:3000/signin", secret, true},
		{"http://legacy.example.com/signin", secret, false},
		{"http://10.0.0.5/signin", secret, false},
		{"https://user:pw@legacy.example.com/signin", secret, false},
		{"ftp://legacy.example.com/signin", secret, false},
		{"/signin", secret, false},
		{"https://legacy.example.com/signin", "", false},
	}
	for _, tt := range tests {
		_, err := New(Options{URL: tt.url, Secret: tt.secret})
		if (err == nil) != tt.ok {
			t.Errorf("New(%q, secret %q): got %v, want ok %v", tt.url, tt.secret, err, tt.ok)
		}
	}
}

func mustNew(t *testing.T, o Options) *Client {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// noSecrets fails when an error, which the issuer logs, shows the
// password, the secret or the URL's path.
func noSecrets(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range []string{password, "hunter2", secret, "/signin"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the error %q shows %q", err, s)
		}
	}
}
