package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/config"
)

// TestSidecarLifecycle drives the package's API as the CLI does: New binds
// and builds, Run serves a sign-up, a JWT and a business call, Reload puts
// an edited file in force (and refuses a broken one, keeping the old),
// and cancelling Run's context stops it cleanly with the store closed.
func TestSidecarLifecycle(t *testing.T) {
	up := echoUpstream(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "sidecar.yaml")
	body := func(limit string) string {
		return fmt.Sprintf("listen: 127.0.0.1:0\nupstream: %q\ndatabase: { path: %q }\nmetrics: { listen: 127.0.0.1:0 }\nlimits: { signup_per_ip: %s }\n",
			up.URL, filepath.Join(dir, "auth.db"), limit)
	}
	writeFile(t, path, body("100/m"))
	getenv := func(k string) string {
		if k == "AUTH_SECRET" {
			return e2eSecret
		}
		return ""
	}
	cfg, secret, hash, err := LoadConfig(path, getenv)
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	ready := make(chan struct{}, 4)
	s, err := New(context.Background(), Options{
		Config: cfg, Secret: secret, Getenv: getenv, Log: &log,
		ConfigPath: path, ConfigHash: hash,
		OnReady: func() { ready <- struct{}{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-ready
	base := "http://" + s.Addr().String()

	post := func(path, body string) *http.Response {
		t.Helper()
		res, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	res := post("/api/auth/sign-up/email", `{"name":"A","email":"a@example.com","password":"correct-horse-battery"}`)
	if res.StatusCode != 200 {
		t.Fatalf("sign-up: got %d, want 200", res.StatusCode)
	}
	req, _ := http.NewRequest("GET", base+"/api/auth/get-session", nil)
	req.AddCookie(res.Cookies()[0])
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	jwt := res.Header.Get("Set-Auth-Jwt")
	req = httptest.NewRequest("GET", "/api/tasks", nil)
	req.Header.Set("Authorization", "Bearer "+jwt)
	// Handler is the same request path, without the listener.
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"path":"/api/tasks"`) {
		t.Fatalf("business call through Handler: got %d %s, want 200 from the upstream", rec.Code, rec.Body.String())
	}

	// A reload with a tighter sign-up limit is in force at once.
	writeFile(t, path, body("1/m"))
	if err := s.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	<-ready
	codes := []int{}
	for i := range 2 {
		codes = append(codes, post("/api/auth/sign-up/email", fmt.Sprintf(`{"name":"B","email":"b%d@example.com","password":"correct-horse-battery"}`, i)).StatusCode)
	}
	if codes[0] != 200 || codes[1] != 429 {
		t.Errorf("sign-ups after the reload to 1/m: got %v, want [200 429]", codes)
	}
	// A broken file is refused whole: the limit in force stays.
	writeFile(t, path, body("1/m")+"auth: { jwt_ttl: forever }\n")
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "jwt_ttl") {
		t.Errorf("Reload of a broken file: got %v, want an error naming auth.jwt_ttl", err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: got %v, want nil after the context ended", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30s after its context ended")
	}
	if err := s.Run(context.Background()); err == nil {
		t.Error("a second Run: got nil, want an error")
	}
	if err := s.Reload(); err == nil {
		t.Error("Reload after Run stopped: got nil, want an error")
	}
}

// TestNewBusyPort: New binds both listeners before it opens the database,
// so a taken port fails start-up and leaves no database file behind.
func TestNewBusyPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, which := range []string{"listen", "metrics.listen"} {
		t.Run(which, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "auth.db")
			cfg := config.Default()
			cfg.Database.Path = db
			cfg.Listen, cfg.Metrics.Listen = "127.0.0.1:0", "127.0.0.1:0"
			if which == "listen" {
				cfg.Listen = taken.Addr().String()
			} else {
				cfg.Metrics.Listen = taken.Addr().String()
			}
			_, err := New(context.Background(), Options{Config: cfg, Secret: config.NewSecret(e2eSecret), Log: io.Discard})
			if err == nil || !strings.Contains(err.Error(), which) {
				t.Fatalf("got %v, want an error naming %s", err, which)
			}
			if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("database file after the failed start: got %v, want none", err)
			}
		})
	}
}
