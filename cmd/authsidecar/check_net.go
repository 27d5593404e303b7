package main

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/authsidecar/authsidecar/config"
)

// dialTimeout bounds check's connection to the upstream.
const dialTimeout = 3 * time.Second

// checkNetwork reports what serve would meet on the network: whether
// anything accepts connections at the upstream, and whether the listen
// addresses are free. Neither is a problem check counts: serve starts
// without an upstream (business requests get 502 until it is up), and
// check is also run beside the live sidecar that holds the addresses.
func checkNetwork(ctx context.Context, r *checkReport, cfg config.Config) {
	checkUpstream(ctx, r, cfg.Upstream)
	checkListen(r, "listen", cfg.Listen)
	checkListen(r, "metrics.listen", cfg.Metrics.Listen)
}

// checkUpstream connects to the upstream's host and port (TCP only: what
// the application answers is its own business).
func checkUpstream(ctx context.Context, r *checkReport, upstream string) {
	u, err := url.Parse(upstream)
	if err != nil || u.Host == "" {
		return // Validate said so
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443"}[u.Scheme]
		if port == "" {
			port = "80"
		}
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
	if err != nil {
		r.warn("upstream %s: nothing accepts connections at %s (%s): serve starts, and business requests get 502 until it does", upstream, addr, dialProblem(err))
		return
	}
	conn.Close()
	r.ok("upstream %s accepts connections", upstream)
}

// dialProblem names why a connection failed, without Go's op prefix.
func dialProblem(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer within " + dialTimeout.String()
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return "host " + dns.Name + " not found"
	}
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// checkListen binds addr for a moment, as serve would, and lets it go.
// Port 0 (any free port) is always free.
func checkListen(r *checkReport, key, addr string) {
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		why := "cannot be bound"
		if errors.Is(err, syscall.EADDRINUSE) {
			why = "is in use"
		}
		r.warn("%s %s %s: serve could not bind it (%s; another process holds it, perhaps a sidecar already running with this file)", key, addr, why, dialProblem(err))
		return
	}
	ln.Close()
	r.ok("%s %s is free", key, addr)
}

// checkAdminRoutes warns of admin routes a verifier without a database
// answers 403 (the defaults: written ones fail config).
func checkAdminRoutes(r *checkReport, cfg config.Config) {
	if !cfg.Verifier() || cfg.Database.Driver != config.DriverNone {
		return
	}
	for _, a := range cfg.Routes.Admin {
		r.warn("routes.admin %s: answered 403: a verifier without a database cannot read roles (routes.admin: [] forwards these paths to an upstream that checks roles itself)", a.Prefix)
	}
}
