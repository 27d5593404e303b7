// Package health serves liveness and readiness. Liveness says the process
// answers; readiness says it can do its job (named checks, all must pass)
// and turns false the moment shutdown begins, so load balancers stop
// sending traffic before the listener closes.
package health

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"
)

// Check is one readiness condition.
type Check struct {
	Name string
	Run  func(ctx context.Context) error
}

// Health holds the readiness checks. The zero value has none and is ready.
type Health struct {
	// Checks all run on every /readyz, each bounded by Timeout.
	Checks []Check
	// Timeout bounds one check. Zero: 2s.
	Timeout  time.Duration
	draining atomic.Bool
}

// Drain makes readiness fail from now on (shutdown has begun).
func (h *Health) Drain() { h.draining.Store(true) }

type report struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks,omitempty"`
}

// Live answers /healthz: the process is up and serving HTTP.
func (h *Health) Live(w http.ResponseWriter, r *http.Request) {
	write(w, http.StatusOK, report{Status: "ok"})
}

// Ready answers /readyz: 200 when every check passes, else 503 naming the
// failing checks (and "shutting_down" while draining).
func (h *Health) Ready(w http.ResponseWriter, r *http.Request) {
	rep, ok := h.run(r.Context())
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	write(w, status, rep)
}

// IsReady runs the same checks as /readyz: the authsidecar_ready gauge
// reads it at scrape time, so an alert sees what a load balancer sees.
func (h *Health) IsReady(ctx context.Context) bool {
	_, ok := h.run(ctx)
	return ok
}

func (h *Health) run(ctx context.Context) (report, bool) {
	rep := report{Status: "ok", Checks: map[string]string{}}
	ok := true
	if h.draining.Load() {
		rep.Checks["shutdown"] = "shutting_down"
		ok = false
	}
	timeout := h.Timeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	for _, c := range h.Checks {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := c.Run(cctx)
		cancel()
		if err != nil {
			rep.Checks[c.Name] = "fail: " + err.Error()
			ok = false
			continue
		}
		rep.Checks[c.Name] = "ok"
	}
	if !ok {
		rep.Status = "unavailable"
	}
	return rep, ok
}

func write(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}
