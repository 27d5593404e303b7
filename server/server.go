// Package server runs an http.Server with a bounded, lossless shutdown.
//
// http.Server.Shutdown stops accepting and waits for active requests, but
// it neither waits for nor closes hijacked connections (WebSocket tunnels),
// and it waits forever on a response that never ends (SSE). Server tracks
// every handler itself: at shutdown it waits for all of them until the
// grace period ends, then cancels the ones left (which closes their
// tunnels and streams) and waits for them to return, so the caller can
// close the database knowing no handler still uses it.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Tracker counts running handlers and can cancel them all.
type Tracker struct {
	active atomic.Int64
	stop   context.Context
	cancel context.CancelFunc
}

// NewTracker returns a Tracker; put its Middleware outermost.
func NewTracker() *Tracker {
	t := &Tracker{}
	t.stop, t.cancel = context.WithCancel(context.Background())
	return t
}

// Middleware counts the request. An upgrade request also gets its context
// tied to the tracker, so StopAll cancels it (ReverseProxy then closes the
// tunnel): Server.Close cannot reach a hijacked connection. Every other
// request, endless streams included, ends when Close closes its
// connection, which cancels its context; sparing them the hook keeps the
// hot path to one atomic add.
func (t *Tracker) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.active.Add(1)
		defer t.active.Add(-1)
		if r.Header.Get("Upgrade") == "" {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		unhook := context.AfterFunc(t.stop, cancel)
		defer unhook()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Active returns the number of running handlers.
func (t *Tracker) Active() int64 { return t.active.Load() }

// StopAll cancels every running and future request.
func (t *Tracker) StopAll() { t.cancel() }

// wait polls until no handler runs or ctx ends. Shutdown is rare; a short
// poll keeps the hot path to one atomic add.
func (t *Tracker) wait(ctx context.Context) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for t.active.Load() > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// Server is one listener with its tracked handler.
type Server struct {
	// HTTP is the server; its Handler must be wrapped by Tracker.Middleware.
	HTTP *http.Server
	// Listener is already bound (so start-up errors surface before Run).
	Listener net.Listener
	// Tracker sees every handler. Required.
	Tracker *Tracker
	// Grace is how long running requests may finish after shutdown starts.
	// Zero: 25s.
	Grace time.Duration
	// OnDrain runs first when shutdown starts (readiness turns 503).
	// Zero: nothing.
	OnDrain func()
	// Logger; zero: slog.Default().
	Logger *slog.Logger
}

// Run serves until ctx ends, then shuts down: drain, stop accepting, let
// running handlers finish within Grace, cancel what remains, and return
// only when every handler has returned.
func (s *Server) Run(ctx context.Context) error {
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	grace := s.Grace
	if grace == 0 {
		grace = 25 * time.Second
	}
	errc := make(chan error, 1)
	go func() { errc <- s.HTTP.Serve(s.Listener) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", s.Listener.Addr(), err)
	case <-ctx.Done():
	}
	if s.OnDrain != nil {
		s.OnDrain()
	}
	log.Info("shutting down", "addr", s.Listener.Addr().String(), "grace", grace.String(), "active", s.Tracker.Active())
	gctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	shutErr := s.HTTP.Shutdown(gctx)
	if !s.Tracker.wait(gctx) || shutErr != nil {
		log.Warn("grace period over: closing remaining connections", "active", s.Tracker.Active())
		s.Tracker.StopAll()
		s.HTTP.Close()
		hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer hcancel()
		if !s.Tracker.wait(hctx) {
			log.Error("handlers still running after cancellation", "active", s.Tracker.Active())
		}
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", s.Listener.Addr(), err)
	}
	return nil
}
