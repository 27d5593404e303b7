package sidecar

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/authsidecar/authsidecar/health"
)

// adminMux serves the operator endpoints, on their own listener: never on
// the public port, never on http.DefaultServeMux.
// rl, when not nil, serves POST /-/reload.
func adminMux(reg *prometheus.Registry, hl *health.Health, profiling bool, rl *reloader) http.Handler {
	mux := http.NewServeMux()
	if rl != nil {
		mux.Handle("POST /-/reload", rl)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", hl.Live)
	mux.HandleFunc("GET /readyz", hl.Ready)
	if profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}
