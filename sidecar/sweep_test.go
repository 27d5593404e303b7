package sidecar

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// TestSidecarSweeps: a full sidecar's Run sweeps the store every
// sweep.interval (an expired session goes, a live one stays, and the
// metrics and the log say so), a reload changes the interval, and the
// sweeper stops with Run. A verifier has no sweeper.
func TestSidecarSweeps(t *testing.T) {
	up := echoUpstream(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "auth.db")
	db, err := sqlstore.OpenSQLite(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	u := issuer.User{ID: "u1", Name: "Ann", Email: "ann@example.com", CreatedAt: now, UpdatedAt: now}
	live := issuer.Session{ID: "live", Token: "t-live", UserID: "u1", ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}
	if err := db.CreateUser(context.Background(), u, "salt:hash", live); err != nil {
		t.Fatal(err)
	}
	expired := live
	expired.ID, expired.Token, expired.ExpiresAt = "expired", "t-expired", now.Add(-time.Minute)
	if err := db.CreateSession(context.Background(), expired); err != nil {
		t.Fatal(err)
	}
	db.Close()

	path := filepath.Join(dir, "sidecar.yaml")
	body := func(interval string) string {
		return fmt.Sprintf("listen: 127.0.0.1:0\nupstream: %q\ndatabase: { path: %q }\nmetrics: { listen: 127.0.0.1:0 }\nsweep: { interval: %s }\n", up.URL, dbPath, interval)
	}
	writeFile(t, path, body("1s"))
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
	s, err := New(context.Background(), Options{Config: cfg, Secret: secret, Getenv: getenv, Log: &log, ConfigPath: path, ConfigHash: hash})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	metrics := "http://" + s.AdminAddr().String() + "/metrics"
	removed := regexp.MustCompile(`(?m)^authsidecar_sweep_removed_total\{kind="session"\} 1$`)
	logged := regexp.MustCompile(`"msg":"expired rows swept".*"removed":\{"session":1\}`)
	// The log is written in batches: it may come a moment after the
	// metric.
	deadline := time.Now().Add(15 * time.Second)
	for !removed.MatchString(get(t, metrics)) || !logged.MatchString(log.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no session swept, or not logged, within 15s at sweep.interval 1s; metrics:\n%s\nlog:\n%s",
				grepLines(get(t, metrics), "authsidecar_sweep_"), grepLines(log.String(), "swept"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, _, err := s.db.SessionByToken(context.Background(), "t-live"); err != nil {
		t.Errorf("the live session: got %v, want it kept", err)
	}
	writeFile(t, path, body("2s"))
	if err := s.Reload(); err != nil {
		t.Errorf("a reload changing sweep.interval: got %v, want it applied", err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: got %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30s after its context ended")
	}

	// A verifier on its issuers' PostgreSQL database leaves it to them.
	vcfg := config.Default()
	vcfg.Mode = config.ModeVerifier
	if sw, err := newSweeper(vcfg, db, nil, nil); sw != nil || err != nil {
		t.Errorf("verifier mode with a database: got sweeper %v %v, want none", sw, err)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// grepLines keeps the lines of s holding sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
