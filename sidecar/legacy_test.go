package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestSidecarLegacySignIn: migration.legacy_signin reaches the issuer
// with the secret from the environment; the metric's series are there
// from the start; a reload turns lazy migration off, and one whose secret
// is missing is refused whole, as is a start without it.
func TestSidecarLegacySignIn(t *testing.T) {
	const secret = "legacy-secret-0123456789"
	var calls atomic.Int32
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var in struct{ Email, Password string }
		json.NewDecoder(r.Body).Decode(&in)
		if r.Header.Get("Authorization") != "Bearer "+secret || in.Password != "legacy-password" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"id": 1042, "email": in.Email, "roles": []string{"admin"}})
	}))
	defer app.Close()
	up := echoUpstream(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "sidecar.yaml")
	file := func(url, secretEnv string) string {
		return fmt.Sprintf("listen: 127.0.0.1:0\nupstream: %q\ndatabase: { path: %q }\nmetrics: { listen: 127.0.0.1:0 }\n"+
			"migration: { legacy_signin: { url: %q, secret_env: %s } }\n", up.URL, filepath.Join(dir, "auth.db"), url, secretEnv)
	}
	writeFile(t, path, file(app.URL+"/signin", "LEGACY_SECRET"))
	env := map[string]string{"AUTH_SECRET": e2eSecret, "LEGACY_SECRET": secret}
	getenv := func(k string) string { return env[k] }
	cfg, key, hash, err := LoadConfig(path, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), Options{Config: cfg, Secret: key, Getenv: func(string) string { return "" }, Log: &syncBuffer{}}); err == nil ||
		!strings.Contains(err.Error(), "$LEGACY_SECRET is not set") {
		t.Errorf("start without the secret: got %v, want a refusal naming $LEGACY_SECRET", err)
	}
	ready := make(chan struct{}, 8)
	s, err := New(context.Background(), Options{Config: cfg, Secret: key, Getenv: getenv, Log: &syncBuffer{},
		ConfigPath: path, ConfigHash: hash, OnReady: func() { ready <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-ready
	base := "http://" + s.Addr().String()
	signIn := func(email string) int {
		t.Helper()
		res, err := http.Post(base+"/api/auth/sign-in/email", "application/json",
			strings.NewReader(`{"email":"`+email+`","password":"legacy-password"}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	res, err := http.Get("http://" + s.AdminAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, r := range []string{"migrated", "refused", "unavailable", "invalid", "conflict", "raced"} {
		if want := `authsidecar_legacy_signins_total{result="` + r + `"} 0`; !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics before any sign-in: no %s", want)
		}
	}
	if got := signIn("ann@example.com"); got != 200 || calls.Load() != 1 {
		t.Errorf("lazy migration on: got %d after %d calls, want 200 after 1", got, calls.Load())
	}

	// Off by reload: the migrated user is the sidecar's; a new address is
	// not passed on.
	writeFile(t, path, file("", "LEGACY_SECRET"))
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	<-ready
	if a, b := signIn("ann@example.com"), signIn("bob@example.com"); a != 200 || b != 401 || calls.Load() != 1 {
		t.Errorf("lazy migration off: got %d for the migrated user, %d for a new address, %d calls; want 200, 401, 1", a, b, calls.Load())
	}
	// On again, with a secret that is not set: refused, off stays.
	writeFile(t, path, file(app.URL+"/signin", "MISSING_SECRET"))
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "MISSING_SECRET") {
		t.Errorf("reload without the secret: got %v, want it refused naming $MISSING_SECRET", err)
	}
	<-ready
	if b := signIn("bob@example.com"); b != 401 || calls.Load() != 1 {
		t.Errorf("after the refused reload: got %d, %d calls; want 401, 1", b, calls.Load())
	}
}
