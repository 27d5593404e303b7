package health

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

func TestReadyFailsThenRecovers(t *testing.T) {
	var broken atomic.Bool
	h := &Health{Checks: []Check{
		{Name: "keyset", Run: func(context.Context) error { return nil }},
		{Name: "database", Run: func(context.Context) error {
			if broken.Load() {
				return errors.New("database is closed")
			}
			return nil
		}},
	}}
	ready := func() (int, report) {
		rec := httptest.NewRecorder()
		h.Ready(rec, httptest.NewRequest("GET", "/readyz", nil))
		var rep report
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		return rec.Code, rep
	}
	steps := []struct {
		name     string
		broken   bool
		drain    bool
		want     int
		failName string
	}{
		{"healthy", false, false, 200, ""},
		{"database down", true, false, 503, "database"},
		{"database back", false, false, 200, ""},
		{"draining", false, true, 503, "shutdown"},
	}
	for _, s := range steps {
		broken.Store(s.broken)
		if s.drain {
			h.Drain()
		}
		code, rep := ready()
		if code != s.want {
			t.Fatalf("%s: got %d %+v, want %d", s.name, code, rep, s.want)
		}
		// The authsidecar_ready gauge reads IsReady: it must agree with
		// what /readyz answers, in each state.
		if got := h.IsReady(context.Background()); got != (code == http.StatusOK) {
			t.Errorf("%s: IsReady = %v with /readyz %d", s.name, got, code)
		}
		if s.failName != "" && rep.Checks[s.failName] == "ok" {
			t.Errorf("%s: got %+v, want check %q failing", s.name, rep, s.failName)
		}
	}
	rec := httptest.NewRecorder()
	h.Live(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("healthz while draining: got %d, want 200 (alive)", rec.Code)
	}
}
