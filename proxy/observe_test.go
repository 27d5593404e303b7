package proxy_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authsidecar/authsidecar/internal/syncbuf"
	"github.com/authsidecar/authsidecar/proxy"
)

// TestObserveCountsPanicsAndAborts: in the order the sidecar chains them
// (sidecar/stack.go), a handler's panic is answered 500 and that 500 is
// logged and counted; an answer cut short (http.ErrAbortHandler: the
// client left a stream, the upstream cut a body) is logged with
// close_reason "aborted" and counted with the status it had sent, and the
// client sees it cut, not complete.
func TestObserveCountsPanicsAndAborts(t *testing.T) {
	cases := []struct {
		name        string
		handler     http.HandlerFunc
		wantStatus  int
		wantReason  string
		wantCutBody bool
	}{
		{"panic", func(http.ResponseWriter, *http.Request) { panic("boom") }, 500, "", false},
		{"aborted", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusOK)
			w.Write([]byte("part of it"))
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		}, 200, proxy.CloseReasonAborted, true},
		{"answered", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }, 200, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			var access syncbuf.Buffer
			discard := slog.New(slog.NewTextHandler(io.Discard, nil))
			h := proxy.Chain(tc.handler, proxy.RequestID(), proxy.Observe(proxy.NewMetrics(reg), proxy.JSONAccessLog(&access, discard)), proxy.Recover(discard))
			srv := httptest.NewUnstartedServer(h)
			srv.Config.ErrorLog = nil
			srv.Start()
			defer srv.Close()
			res, err := http.Get(srv.URL + "/x")
			if err != nil {
				t.Fatal(err)
			}
			_, bodyErr := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.wantStatus {
				t.Errorf("client got %d, want %d", res.StatusCode, tc.wantStatus)
			}
			if cut := bodyErr != nil; cut != tc.wantCutBody {
				t.Errorf("body cut %v (%v), want %v", cut, bodyErr, tc.wantCutBody)
			}
			srv.Close() // every handler has returned, every line is written
			var line struct {
				Status      int    `json:"status"`
				CloseReason string `json:"close_reason"`
			}
			lines := strings.Split(strings.TrimSpace(access.String()), "\n")
			if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &line) != nil {
				t.Fatalf("access log %q, want one JSON line", access.String())
			}
			if line.Status != tc.wantStatus || line.CloseReason != tc.wantReason {
				t.Errorf("logged status %d close_reason %q, want %d %q", line.Status, line.CloseReason, tc.wantStatus, tc.wantReason)
			}
			if got := requestsCounted(t, reg, tc.wantStatus); got != 1 {
				t.Errorf("authsidecar_requests_total{code=%d} = %v, want 1", tc.wantStatus, got)
			}
		})
	}
}

// requestsCounted is authsidecar_requests_total summed over classes for
// one status code.
func requestsCounted(t *testing.T, reg *prometheus.Registry, status int) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "authsidecar_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == strconv.Itoa(status) {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
