package sidecar

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// TestStackApplyLog: log.level and log.access change on apply, for the
// process log and the access log alike; a failed apply changes neither.
func TestStackApplyLog(t *testing.T) {
	up := echoUpstream(t)
	cfg := config.Default()
	cfg.Upstream = up.URL
	cfg.Database.Path = filepath.Join(t.TempDir(), "auth.db")
	db, err := sqlstore.OpenSQLite(context.Background(), cfg.Database.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var buf syncBuffer
	lg := newLogs(cfg.Log, &buf)
	st, err := buildStack(context.Background(), cfg, config.NewSecret(e2eSecret), db, lg, prometheus.NewRegistry(), nil, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	srv := httptest.NewServer(st.handler)
	defer srv.Close()
	accessLines := func() int {
		res, err := http.Get(srv.URL + "/api/auth/ok")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return strings.Count(buf.String(), `"msg":"request"`)
	}

	steps := []struct {
		name       string
		level      config.LogLevel
		access     bool
		trusted    []string // an invalid entry makes apply fail
		wantLevel  slog.Level
		wantAccess bool
	}{
		{"start-up", "info", true, nil, slog.LevelInfo, true},
		{"warn, access on: access lines are info, so none", "warn", true, nil, slog.LevelWarn, false},
		{"debug, access off", "debug", false, nil, slog.LevelDebug, false},
		{"info, access on", "info", true, nil, slog.LevelInfo, true},
		{"failed apply: error level asked, nothing changes", "error", false, []string{"not an origin"}, slog.LevelInfo, true},
	}
	for i, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if i > 0 {
				next := cfg
				next.Log.Level, next.Log.Access = s.level, s.access
				next.Auth.TrustedOrigins = s.trusted
				err := st.apply(next)
				if (err != nil) != (s.trusted != nil) {
					t.Fatalf("apply: got error %v, want error: %v", err, s.trusted != nil)
				}
			}
			if got := lg.level.Level(); got != s.wantLevel {
				t.Errorf("got level %v, want %v", got, s.wantLevel)
			}
			before := strings.Count(buf.String(), `"msg":"request"`)
			if got := accessLines() > before; got != s.wantAccess {
				t.Errorf("access line written: got %v, want %v", got, s.wantAccess)
			}
		})
	}
}

// jwksServer serves a JWKS of one fresh Ed25519 key under kid, over TLS
// when tls (httptest's own certificate), and counts the fetches.
func jwksServer(t *testing.T, kid string, tls bool) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	var fetches atomic.Int64
	doc := fmt.Sprintf(`{"keys":[{"kty":"OKP","crv":"Ed25519","alg":"EdDSA","use":"sig","kid":%q,"x":%q}]}`, kid, base64.RawURLEncoding.EncodeToString(pub))
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, doc)
	})
	srv := httptest.NewUnstartedServer(h)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &fetches
}

// TestStackApplyJWKS: a verifier's apply builds a new key cache only for
// a new key source, fetched before the switch; a refused apply (the new
// source unusable, or another key invalid) leaves the cache in force and
// fetches nothing more from it; an apply that changes only other keys
// keeps the cache (no fetch, the token cache kept).
func TestStackApplyJWKS(t *testing.T) {
	up := echoUpstream(t)
	a, fetchesA := jwksServer(t, "ka", false)
	b, fetchesB := jwksServer(t, "kb", false)
	cfg := config.Default()
	cfg.Mode, cfg.Database.Driver, cfg.Upstream = "verifier", "none", up.URL
	cfg.Routes.CookieOnly, cfg.Routes.Admin = nil, nil // they need a database
	cfg.Keys.JWKSURL = a.URL + "/api/auth/jwks"
	var buf syncBuffer
	st, err := buildStack(context.Background(), cfg, config.Secret{}, nil, newLogs(cfg.Log, &buf), prometheus.NewRegistry(), nil, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if !st.keys().Has("ka") {
		t.Fatal("at start: kid ka not loaded from A")
	}

	steps := []struct {
		name        string
		change      func(*config.Config)
		wantErr     string // "": applied
		wantNewKeys bool   // another key cache in force afterwards
		wantKID     string // in the key set in force afterwards
		wantFetches [2]int64
	}{
		{"max_age only: same cache, nothing fetched", func(c *config.Config) { c.Keys.MaxAge = config.Duration(5 * time.Minute) }, "", false, "ka", [2]int64{1, 0}},
		{"unreachable URL refused", func(c *config.Config) { c.Keys.JWKSURL = "http://127.0.0.1:1/api/auth/jwks" }, "keys.jwks_url: no usable key set", false, "ka", [2]int64{1, 0}},
		{"URL without a JWKS refused", func(c *config.Config) { c.Keys.JWKSURL = up.URL + "/api/auth/jwks" }, "keys.jwks_url: no usable key set", false, "ka", [2]int64{1, 0}},
		{"B, with an invalid trusted proxy: refused after B's fetch", func(c *config.Config) {
			c.Keys.JWKSURL, c.Proxy.TrustedProxies = b.URL+"/api/auth/jwks", []string{"not a prefix"}
		}, "proxy.trusted_proxies", false, "ka", [2]int64{1, 1}},
		{"B", func(c *config.Config) { c.Keys.JWKSURL = b.URL + "/api/auth/jwks" }, "", true, "kb", [2]int64{1, 2}},
		{"B again, log level only", func(c *config.Config) {
			c.Keys.JWKSURL, c.Log.Level = b.URL+"/api/auth/jwks", "debug"
		}, "", false, "kb", [2]int64{1, 2}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			before := st.keys()
			next := cfg
			s.change(&next)
			err := st.apply(next)
			if s.wantErr == "" && err != nil || s.wantErr != "" && (err == nil || !strings.Contains(err.Error(), s.wantErr)) {
				t.Fatalf("apply: got error %v, want %q", err, s.wantErr)
			}
			if got := st.keys() != before; got != s.wantNewKeys {
				t.Errorf("another key cache in force: got %v, want %v", got, s.wantNewKeys)
			}
			if !st.keys().Has(s.wantKID) || st.keys().Len() != 1 {
				t.Errorf("key set in force: want kid %s alone", s.wantKID)
			}
			if got := [2]int64{fetchesA.Load(), fetchesB.Load()}; got != s.wantFetches {
				t.Errorf("fetches of A and B: got %v, want %v", got, s.wantFetches)
			}
		})
	}

	st.close()
	next := cfg
	next.Keys.JWKSURL = a.URL + "/api/auth/jwks"
	if err := st.apply(next); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("apply after close: got %v, want refused (shutting down)", err)
	}
	if got := fetchesA.Load(); got != 1 {
		t.Errorf("apply after close fetched A: %d fetches, want 1", got)
	}
}

// TestStackApplyJWKSCAFile: keys.jwks_ca_file is applied with the URL it
// serves: switching to an https JWKS signed by a private CA works with
// that CA's file and is refused without it, the key set in force staying.
func TestStackApplyJWKSCAFile(t *testing.T) {
	up := echoUpstream(t)
	plain, _ := jwksServer(t, "kplain", false)
	private, fetches := jwksServer(t, "kprivate", true)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	writeFile(t, caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: private.Certificate().Raw})))

	cfg := config.Default()
	cfg.Mode, cfg.Database.Driver, cfg.Upstream = "verifier", "none", up.URL
	cfg.Routes.CookieOnly, cfg.Routes.Admin = nil, nil // they need a database
	cfg.Keys.JWKSURL = plain.URL + "/api/auth/jwks"
	var buf syncBuffer
	st, err := buildStack(context.Background(), cfg, config.Secret{}, nil, newLogs(cfg.Log, &buf), prometheus.NewRegistry(), nil, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()

	steps := []struct {
		name    string
		caFile  string
		wantErr string
		wantKID string
	}{
		{"https without its CA refused", "", "certificate", "kplain"},
		{"https with its CA", caFile, "", "kprivate"},
		{"the CA file dropped: refused, the private set stays", "", "certificate", "kprivate"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			next := cfg
			next.Keys.JWKSURL, next.Keys.JWKSCAFile = private.URL+"/api/auth/jwks", s.caFile
			err := st.apply(next)
			if s.wantErr == "" && err != nil || s.wantErr != "" && (err == nil || !strings.Contains(err.Error(), s.wantErr)) {
				t.Fatalf("apply: got error %v, want %q", err, s.wantErr)
			}
			if !st.keys().Has(s.wantKID) {
				t.Errorf("key set in force: want kid %s", s.wantKID)
			}
		})
	}
	if got := fetches.Load(); got != 1 {
		t.Errorf("the private JWKS was fetched %d times, want 1 (the handshakes without its CA fail first)", got)
	}
}
