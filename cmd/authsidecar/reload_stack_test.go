package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

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
	st, err := buildStack(context.Background(), cfg, config.NewSecret(e2eSecret), db, lg, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.keys.Close()
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
		level      string
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
