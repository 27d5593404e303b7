package sidecar

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/authsidecar/authsidecar/internal/syncbuf"
)

const e2eSecret = "e2e-secret-0123456789abcdefghijklmnopqrstuvwxyz"

// syncBuffer collects a log that the sidecar writes while the test reads.
type syncBuffer = syncbuf.Buffer

// echoUpstream is the app behind the sidecar: it answers with the path and
// the user id it was given.
func echoUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"user": r.Header.Get("X-User-Id"), "path": r.URL.Path})
	}))
	t.Cleanup(up.Close)
	return up
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// runSidecar runs a sidecar from the file that file writes for a
// temporary directory (its database goes there), with AUTH_SECRET and
// env in its environment, until the test's cleanup stops it.
func runSidecar(t *testing.T, file func(dir string) string, env map[string]string) *Sidecar {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "sidecar.yaml")
	writeFile(t, path, file(dir))
	getenv := func(k string) string {
		if k == "AUTH_SECRET" {
			return e2eSecret
		}
		return env[k]
	}
	cfg, secret, hash, err := LoadConfig(path, getenv)
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{}, 8)
	s, err := New(context.Background(), Options{
		Config: cfg, Secret: secret, Getenv: getenv, Log: &syncBuffer{},
		ConfigPath: path, ConfigHash: hash, OnReady: func() { ready <- struct{}{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-ready
	return s
}
