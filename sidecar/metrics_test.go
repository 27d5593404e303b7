package sidecar

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/sqlstore"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestMetricsGolden drives a fixed flow through the wired stack and
// compares the counters with testdata/metrics.golden.
func TestMetricsGolden(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{}`)) }))
	defer up.Close()
	cfg := config.Default()
	cfg.Upstream = up.URL
	cfg.Database.Path = filepath.Join(t.TempDir(), "auth.db")
	// The start-up read of revocations only: no poll within the test, so
	// the query counts are the flow's.
	cfg.Revocation.PollInterval = config.Duration(time.Minute)
	db, err := sqlstore.OpenSQLite(context.Background(), cfg.Database.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := prometheus.NewRegistry()
	countQueries(db, reg)
	st, err := buildStack(context.Background(), cfg, config.NewSecret(e2eSecret), db, newLogs(cfg.Log, io.Discard), reg, nil, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	newReloadMetrics(reg) // serve registers them beside the stack
	srv := httptest.NewServer(st.handler)
	defer srv.Close()
	do := func(method, path, body string, hdr ...string) *http.Response {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	user := `{"name":"M","email":"m@example.com","password":"correct-horse-battery"}`
	do("POST", "/api/auth/sign-up/email", user)
	do("POST", "/api/auth/sign-up/email", user)
	do("POST", "/api/auth/sign-in/email", `{"email":"m@example.com","password":"wrong-password"}`)
	res := do("POST", "/api/auth/sign-in/email", `{"email":"m@example.com","password":"correct-horse-battery"}`)
	cookie := res.Cookies()[0]
	jwt := do("GET", "/api/auth/get-session", "", "Cookie", cookie.Name+"="+cookie.Value).Header.Get("Set-Auth-Jwt")
	for range 3 {
		do("GET", "/api/tasks", "", "Authorization", "Bearer "+jwt)
	}
	do("GET", "/api/tasks", "")
	do("GET", "/api/tasks", "", "Authorization", "Bearer garbage")
	do("GET", "/api/%2e%2e/admin", "")
	do("GET", "/api/admin/x", "", "Authorization", "Bearer "+jwt)
	do("GET", "/api/mcp-oauth/authorize", "", "Cookie", cookie.Name+"="+cookie.Value)
	do("GET", "/index.html", "")
	// A second session signs out: its JWT is refused at once (revoked),
	// the first session's keeps working.
	second := do("POST", "/api/auth/sign-in/email", `{"email":"m@example.com","password":"correct-horse-battery"}`).Cookies()[0]
	gone := do("GET", "/api/auth/get-session", "", "Cookie", second.Name+"="+second.Value).Header.Get("Set-Auth-Jwt")
	do("POST", "/api/auth/sign-out", "", "Cookie", second.Name+"="+second.Value)
	do("GET", "/api/tasks", "", "Authorization", "Bearer "+gone)
	do("GET", "/api/tasks", "", "Authorization", "Bearer "+jwt)

	names := []string{
		"authsidecar_requests_total", "authsidecar_auth_failures_total", "authsidecar_db_queries_total",
		"authsidecar_signins_total", "authsidecar_signups_total", "authsidecar_jwts_issued_total",
		"authsidecar_keyset_refreshes_total", "authsidecar_keyset_usable", "authsidecar_keys_loaded", "authsidecar_inflight_requests",
		"authsidecar_token_cache_hits_total", "authsidecar_token_cache_misses_total", "authsidecar_token_cache_entries",
		"authsidecar_websocket_closed_total", "authsidecar_config_reloads_total",
		"authsidecar_revocation_set_size", "authsidecar_revocations_total", "authsidecar_revocation_sync_failures_total",
		"authsidecar_revocation_feed_answers_total",
		// Counted when the stack was built, before any sign-up: the flow's
		// requests never count it again (at most once a minute, at a scrape).
		"authsidecar_password_hashes",
	}
	golden := filepath.Join("testdata", "metrics.golden")
	if *update {
		writeGolden(t, reg, golden, names)
	}
	f, err := os.Open(golden)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := testutil.GatherAndCompare(reg, f, names...); err != nil {
		t.Fatal(err)
	}
	if n := counterValue(t, reg, "authsidecar_db_queries_total", "class", "business"); n != 0 {
		t.Errorf("business requests made %v store queries, want 0", n)
	}
	if n := counterValue(t, reg, "authsidecar_requests_total", "class", "business"); n != 7 {
		t.Errorf("got %v business requests counted, want 7", n)
	}
}

// writeGolden writes the exposition of names (go test -run Golden -update).
func writeGolden(t *testing.T, reg *prometheus.Registry, path string, names []string) {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		if slices.Contains(names, mf.GetName()) {
			expfmt.MetricFamilyToText(&buf, mf)
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// counterValue sums a counter's samples whose label has value.
func counterValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
