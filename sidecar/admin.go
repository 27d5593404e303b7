package sidecar

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/health"
)

// adminMux serves the operator endpoints, on their own listener: never on
// the public port, never on http.DefaultServeMux. Every request a browser
// marks as sent by a page is refused (refuseBrowsers). rl, when not nil,
// serves POST /-/reload, behind token when that is set.
func adminMux(reg *prometheus.Registry, hl *health.Health, profiling bool, rl *reloader, token config.Secret) http.Handler {
	mux := http.NewServeMux()
	if rl != nil {
		mux.Handle("POST /-/reload", requireToken(token, rl))
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
	return refuseBrowsers(mux)
}

// refuseBrowsers answers 403 to every request a browser sent on a page's
// behalf: one with an Origin header (any value, "null" too), or with
// Sec-Fetch-Site other than "none" (a typed URL or a bookmark). The admin
// listener is for operators' tools (curl, Prometheus, probes), which send
// neither; a page on any site a person with access to the admin port
// visits could otherwise POST /-/reload (a simple request needs no
// preflight) or read a profile. It is no substitute for keeping the port
// off every network but the operator's.
func refuseBrowsers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, origin := r.Header["Origin"]
		if site := r.Header.Get("Sec-Fetch-Site"); origin || site != "" && site != "none" {
			adminError(w, http.StatusForbidden, "BROWSER_REQUEST_REFUSED", "The admin listener does not answer requests sent by web pages")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireToken lets through requests with "Authorization: Bearer token"
// (compared in constant time); others get 401. An empty token requires
// nothing.
func requireToken(token config.Secret, next http.Handler) http.Handler {
	want := token.Bytes()
	if len(want) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || len(r.Header.Values("Authorization")) != 1 || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="authsidecar admin"`)
			adminError(w, http.StatusUnauthorized, "UNAUTHORIZED", "POST /-/reload needs the token from metrics.reload_token_env: Authorization: Bearer <token>")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// adminError writes the JSON error body every admin refusal carries.
func adminError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // "<token>" as written; the body is JSON, never HTML
	enc.Encode(map[string]string{"code": code, "message": message})
}
