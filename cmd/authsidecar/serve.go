package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/health"
	"github.com/authsidecar/authsidecar/internal/gcfloor"
	"github.com/authsidecar/authsidecar/internal/sdnotify"
	"github.com/authsidecar/authsidecar/server"
	"github.com/authsidecar/authsidecar/sqlstore"
)

func cmdServe(ctx context.Context, e *cliEnv, args []string) error {
	if err := noArgs("serve", args); err != nil {
		return err
	}
	// Caught from the start: SIGHUP's default action ends the process,
	// and systemd may send it (ExecReload) as soon as the unit is up.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	cfg, secret, hash, err := loadConfigHash(e)
	if err != nil {
		return err
	}
	out := newBufferedLog(e.stderr)
	defer out.Close()
	lg := newLogs(cfg.Log, out)
	// Under systemd (Type=notify): READY=1 once both listeners are bound
	// and the keys loaded, STOPPING=1 when the signal arrives.
	sd := sdnotify.New(e.getenv, os.Getpid(), lg.log)
	stopped := make(chan struct{})
	stopNotify := context.AfterFunc(ctx, func() { defer close(stopped); sd.Stopping() })
	// AfterFunc runs Stopping in its own goroutine: wait for it, or an
	// idle sidecar could exit before STOPPING=1 is sent.
	defer func() {
		if !stopNotify() {
			<-stopped
		}
	}()
	// The watchdog pings until serve returns, not until the signal: the
	// drain (shutdown.grace) must not look like a hang.
	wctx, stopWatchdog := context.WithCancel(context.Background())
	watchdogDone := make(chan struct{})
	go func() { defer close(watchdogDone); sd.Watchdog(wctx) }()
	defer func() { stopWatchdog(); <-watchdogDone }()
	return serve(ctx, cfg, secret, e.getenv, lg, nil, serveHooks{
		configPath: e.configPath, configHash: hash, hup: hup,
		onReady: sd.Ready, onReloading: sd.Reloading,
	})
}

// serveHooks connect serve to its process. Every field may be zero.
type serveHooks struct {
	// configPath is the file reloads re-read, configHash its fileHash at
	// start-up. Zero: no file (the demo), no reload.
	configPath, configHash string
	// hup delivers SIGHUP: reload. Zero: no signal reloads.
	hup <-chan os.Signal
	// onReady is called once both listeners accept, and after each
	// reload; onReloading before each reload (systemd's READY=1 and
	// RELOADING=1).
	onReady, onReloading func()
}

// serve runs the sidecar until ctx ends. ln, when not nil, is the public
// listener already bound (the demo binds first to learn its port).
func serve(ctx context.Context, cfg config.Config, secret config.Secret, getenv func(string) string, lg logs, ln net.Listener, hooks serveHooks) error {
	log := lg.log
	// Collect when the heap reaches gcHeapFloor (or twice the live heap,
	// if more) instead of every 4 MiB: about a sixth as many collections
	// under load, for a steady RSS still well under 64 MiB. GOGC in the
	// environment turns this off; GOMEMLIMIT still caps the top.
	defer gcfloor.Start(gcHeapFloor).Stop()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	db, err := openStore(ctx, cfg, getenv)
	if err != nil {
		return err
	}
	if db != nil {
		// Closed last: Run returns only after every handler has.
		defer db.Close()
	}
	countQueries(db, reg)

	mailSecret, err := cfg.LoadMailSecret(getenv)
	if err != nil {
		return err
	}
	var mw *mailWiring
	if db != nil {
		if mw, err = newMailWiring(cfg, secret, mailSecret, db, log, reg); err != nil {
			return err
		}
	}
	st, err := buildStack(ctx, cfg, secret, db, lg, reg, mw)
	if err != nil {
		return err
	}
	defer st.close()
	rm := newReloadMetrics(reg)
	rm.loaded(hooks.configHash, time.Now())
	var rl *reloader
	if hooks.configPath != "" {
		rl = &reloader{
			path: hooks.configPath, st: st, log: log, metrics: rm,
			reloading: hooks.onReloading, ready: hooks.onReady,
			cfg: cfg, hash: hooks.configHash,
		}
	}
	// Start-up hashed a dummy password (the issuer's timing guard for
	// unknown emails): 32 MiB of scrypt garbage that an idle sidecar would
	// otherwise keep resident until the runtime's two-minute forced GC.
	debug.FreeOSMemory()
	// Bind both listeners before serving, so a taken port fails start-up.
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("listen %s: %w", cfg.Listen, err)
		}
	}
	adminLn, err := net.Listen("tcp", cfg.Metrics.Listen)
	if err != nil {
		ln.Close()
		return fmt.Errorf("metrics listen %s: %w", cfg.Metrics.Listen, err)
	}

	checks := []health.Check{
		{Name: "keyset", Run: func(context.Context) error {
			// The key set in force: a reload may switch a verifier's.
			if keys := st.keys(); !keys.Usable() || keys.Len() == 0 {
				return errors.New("no usable verification keys")
			}
			return nil
		}},
	}
	if st.issuer != nil {
		checks = append(checks, health.Check{Name: "signing_key", Run: func(context.Context) error {
			if !st.issuer.HasSigningKey() {
				return errors.New("no usable signing key")
			}
			return nil
		}})
	}
	if db != nil && cfg.Health.ReadyRequiresDatabase {
		checks = append(checks, health.Check{Name: "database", Run: db.Ping})
	}
	hl := &health.Health{Checks: checks}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "authsidecar_ready", Help: "1 when /readyz would answer 200 (the same checks, run at scrape time); 0 while a check fails or shutdown has begun.",
	}, func() float64 {
		if hl.IsReady(context.Background()) {
			return 1
		}
		return 0
	}))

	mainTracker, adminTracker := server.NewTracker(), server.NewTracker()
	public := &server.Server{
		HTTP:     newHTTPServer(mainTracker.Middleware(st.handler), log),
		Listener: ln, Tracker: mainTracker, Grace: cfg.Shutdown.Grace.D(), OnDrain: hl.Drain, Logger: log,
	}
	admin := &server.Server{
		HTTP:     newHTTPServer(adminTracker.Middleware(adminMux(reg, hl, cfg.Metrics.Pprof, rl)), log),
		Listener: adminLn, Tracker: adminTracker, Grace: time.Second, Logger: log,
	}
	log.Info("listening", "addr", ln.Addr().String(), "metrics_addr", adminLn.Addr().String(),
		"mode", cfg.Mode, "base_url", cfg.BaseURL, "upstream", cfg.Upstream, "database", dbName(db), "keys", st.keys().Len())

	// The admin listener outlives the main one so /readyz reports 503 while
	// requests drain.
	adminCtx, stopAdmin := context.WithCancel(context.Background())
	adminErr := make(chan error, 1)
	go func() { adminErr <- admin.Run(adminCtx) }()
	if hooks.onReady != nil {
		hooks.onReady()
	}
	hupDone := make(chan struct{})
	go func() {
		defer close(hupDone)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hooks.hup: // never ready when nil
				if rl != nil {
					rl.reload() // logged and counted; the old config stays on error
				}
			}
		}
	}()
	// The outbox worker delivers until the requests that queue mail are
	// done; what it has not sent stays queued for the next start.
	mailCtx, stopMail := context.WithCancel(context.Background())
	mailDone := make(chan struct{})
	go func() {
		defer close(mailDone)
		if mw != nil {
			mw.worker.Run(mailCtx)
		}
	}()
	err = public.Run(ctx)
	<-hupDone // a reload under way ends before the store closes
	if st.issuer != nil {
		st.issuer.Drain() // mail queued after its request was answered
	}
	stopMail()
	<-mailDone
	stopAdmin()
	if aerr := <-adminErr; err == nil {
		err = aerr
	}
	if err == nil {
		log.Info("stopped")
	}
	return err
}

// gcHeapFloor is the heap size below which the collector does not run.
const gcHeapFloor = 24 << 20

func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		// OPTIONS * is ours to answer, with JSON like every other refusal.
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

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

// dbName names the database for the start-up log line (never a password).
func dbName(db *sqlstore.DB) string {
	if db == nil {
		return "none"
	}
	return db.String()
}
