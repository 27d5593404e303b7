package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/health"
	"github.com/authsidecar/authsidecar/internal/gcfloor"
	"github.com/authsidecar/authsidecar/server"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// Options configure a Sidecar. Config is required; every other field's
// zero value is documented.
type Options struct {
	// Config is the configuration in force at start. New validates it.
	Config config.Config
	// Secret is AUTH_SECRET (config.Config.LoadSecret). Zero: the config
	// needs none (a verifier without cookie-only routes).
	Secret config.Secret
	// Getenv reads the environment: the database URL, the mail secrets
	// and the reload token the config names. Nil: os.Getenv.
	Getenv func(string) string
	// Log receives the process log and the access log, batched (see
	// bufferedLog). Nil: os.Stderr.
	Log io.Writer
	// Listener, when not nil, is the public listener already bound (the
	// demo binds first to learn its port); the Sidecar closes it. Nil:
	// New listens on Config.Listen.
	Listener net.Listener
	// ConfigPath is the file Reload re-reads, and ConfigHash its FileHash
	// when Config was read from it. Zero: Reload refuses (no file: the
	// demo) and POST /-/reload is not served.
	ConfigPath, ConfigHash string
	// OnReady is called once both listeners accept, and after each
	// reload, successful or not; OnReloading before each reload
	// (systemd's READY=1 and RELOADING=1). Nil: not called.
	OnReady, OnReloading func()
}

// Sidecar is the running authsidecar: the store, the signing keys, the
// issuer, the proxy, the outbox worker and the metrics, built from one
// config, behind a public listener and an admin one. Create it with New,
// serve with Run; Reload applies a changed config file while it serves.
type Sidecar struct {
	cfg  config.Config
	out  *bufferedLog
	log  *slog.Logger
	gc   *gcfloor.Floor
	db   *sqlstore.DB // nil in verifier mode without a database
	mail *mailWiring  // nil when email.delivery is off
	// sweep deletes the rows nothing will read again; nil in verifier
	// mode.
	sweep *sqlstore.Sweeper
	st    *stack
	rl    *reloader // nil without a config file
	hl    *health.Health
	ready func()

	public, admin *server.Server
	runOnce       sync.Once
}

// New builds the sidecar from o and binds both listeners, before it opens
// (and perhaps creates) the database or a key, so a taken port leaves
// nothing behind. Nothing is served until Run. On error, whatever New
// opened is closed again.
func New(ctx context.Context, o Options) (_ *Sidecar, err error) {
	cfg := o.Config
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	w := o.Log
	if w == nil {
		w = os.Stderr
	}
	s := &Sidecar{cfg: cfg, out: newBufferedLog(w), ready: o.OnReady}
	var closers []func()
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		}
	}()
	closers = append(closers, func() { s.out.Close() })
	lg := newLogs(cfg.Log, s.out)
	s.log = lg.log
	// What the environment must hold is checked before anything is bound
	// or opened: a missing variable is the clearest refusal there is.
	if cfg.Database.Driver == config.DriverPostgres {
		if _, err := cfg.LoadDatabaseURL(getenv); err != nil {
			return nil, err
		}
	}
	mailSecret, err := cfg.LoadMailSecret(getenv)
	if err != nil {
		return nil, err
	}
	if _, err := cfg.LoadProviderSecrets(getenv); err != nil {
		return nil, err
	}
	if _, err := cfg.LoadLegacySecret(getenv); err != nil {
		return nil, err
	}
	if _, err := cfg.LoadBetterAuthSecret(getenv); err != nil {
		return nil, err
	}
	reloadToken, err := cfg.LoadReloadToken(getenv)
	if err != nil {
		return nil, err
	}

	ln := o.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
		}
	}
	closers = append(closers, func() { ln.Close() })
	adminLn, err := net.Listen("tcp", cfg.Metrics.Listen)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen %s: %w", cfg.Metrics.Listen, err)
	}
	closers = append(closers, func() { adminLn.Close() })

	// Collect when the heap reaches gcHeapFloor (or half as much again as
	// the live heap, if more) instead of every 4 MiB: a quarter as many
	// collections under load, for a steady RSS at most twice a bare
	// proxy's. GOGC in the environment turns this off; GOMEMLIMIT still
	// caps the top.
	s.gc = gcfloor.Start(gcHeapFloor)
	closers = append(closers, s.gc.Stop)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	if s.db, err = OpenStore(ctx, cfg, getenv); err != nil {
		return nil, err
	}
	if s.db != nil {
		closers = append(closers, func() { s.db.Close() })
	}
	countQueries(s.db, reg)
	if s.db != nil {
		if s.mail, err = newMailWiring(cfg, o.Secret, mailSecret, s.db, s.log, reg); err != nil {
			return nil, err
		}
	}
	if s.sweep, err = newSweeper(cfg, s.db, s.log, reg); err != nil {
		return nil, err
	}
	if s.st, err = buildStack(ctx, cfg, o.Secret, s.db, lg, reg, s.mail, getenv); err != nil {
		return nil, err
	}
	closers = append(closers, s.st.close)
	rm := newReloadMetrics(reg)
	rm.loaded(o.ConfigHash, time.Now())
	if o.ConfigPath != "" {
		s.rl = &reloader{
			path: o.ConfigPath, st: s.st, log: s.log, metrics: rm,
			reloading: o.OnReloading, ready: o.OnReady, sweep: s.sweep,
			cfg: cfg, hash: o.ConfigHash,
		}
	}
	s.hl = &health.Health{Checks: s.checks()}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "authsidecar_ready", Help: "1 when /readyz would answer 200 (the same checks, run at scrape time); 0 while a check fails or shutdown has begun.",
	}, func() float64 {
		if s.hl.IsReady(context.Background()) {
			return 1
		}
		return 0
	}))

	mainTracker, adminTracker := server.NewTracker(), server.NewTracker()
	s.public = &server.Server{
		HTTP:     newHTTPServer(mainTracker.Middleware(s.st.handler), s.log),
		Listener: ln, Tracker: mainTracker, Grace: cfg.Shutdown.Grace.D(), OnDrain: func() { s.hl.Drain(); s.st.drain() }, Logger: s.log,
	}
	s.admin = &server.Server{
		HTTP:     newHTTPServer(adminTracker.Middleware(adminMux(reg, s.hl, cfg.Metrics.Pprof, s.rl, reloadToken)), s.log),
		Listener: adminLn, Tracker: adminTracker, Grace: time.Second, Logger: s.log,
	}
	// Start-up hashed a dummy password (the issuer's timing guard for
	// unknown emails); its 32 MiB would linger a second for a sign-in
	// that is not coming. An idle sidecar starts at its idle size.
	debug.FreeOSMemory()
	return s, nil
}

// gcHeapFloor is the heap size below which the collector does not run.
// Under load at 64 connections a 24 MiB floor held 2.15x a bare proxy's
// peak RSS, 16 MiB 1.8x (a run reached 1.94x), 12 MiB 1.6x
// (docs/benchmarks.md, g-64). Each step down adds a few collections a
// second under load, ~1.4 ms of CPU each: a few tenths of a percent.
const gcHeapFloor = 12 << 20

// checks are what /readyz runs: usable verification keys, in full mode a
// usable signing key, and the database when health.ready_requires_database.
func (s *Sidecar) checks() []health.Check {
	checks := []health.Check{
		{Name: "keyset", Run: func(context.Context) error {
			// The key set in force: a reload may switch a verifier's.
			if keys := s.st.keys(); !keys.Usable() || keys.Len() == 0 {
				return errors.New("no usable verification keys")
			}
			return nil
		}},
	}
	checks = append(checks, health.Check{Name: "revocations", Run: func(context.Context) error {
		// The set in force: a reload may switch a verifier's.
		return s.st.current.Load().ver.revs.ready()
	}})
	if iss := s.st.issuer; iss != nil {
		checks = append(checks, health.Check{Name: "signing_key", Run: func(context.Context) error {
			if !iss.HasSigningKey() {
				return errors.New("no usable signing key")
			}
			return nil
		}})
	}
	if s.db != nil && s.cfg.Health.ReadyRequiresDatabase {
		checks = append(checks, health.Check{Name: "database", Run: s.db.Ping})
	}
	return checks
}

// Handler returns the public request handler: each request is served by
// the config in force when it arrived, to its end.
func (s *Sidecar) Handler() http.Handler { return s.st.handler }

// Addr is the public listener's address; AdminAddr the admin listener's.
func (s *Sidecar) Addr() net.Addr      { return s.public.Listener.Addr() }
func (s *Sidecar) AdminAddr() net.Addr { return s.admin.Listener.Addr() }

// Reload re-reads Options.ConfigPath and puts it in force whole, or
// changes nothing and says why: an invalid file, a changed key that needs
// a restart, or (in verifier mode) a JWKS URL that gave no usable key.
// Each reload is logged and counted. Safe to call while Run serves; after
// Run has begun to stop it refuses.
func (s *Sidecar) Reload() error {
	if s.rl == nil {
		return errors.New("reload: the sidecar was not started from a config file")
	}
	return s.rl.reload()
}

// Run serves until ctx ends, then stops in order: the sweeper stops
// between two batches and the public listener drains (in-flight requests
// get shutdown.grace; /readyz answers 503 meanwhile), then no reload
// applies any more, mail queued after its request was answered is stored,
// the outbox worker stops, the admin listener closes, and last the store.
// Run returns the first serving error, and may be called once.
func (s *Sidecar) Run(ctx context.Context) error {
	err := errors.New("sidecar: Run called twice")
	s.runOnce.Do(func() { err = s.run(ctx) })
	return err
}

func (s *Sidecar) run(ctx context.Context) error {
	defer s.out.Close()
	defer s.gc.Stop()
	if s.db != nil {
		// Closed last: Run returns only after every handler has.
		defer s.db.Close()
	}
	s.log.Info("listening", "addr", s.Addr().String(), "metrics_addr", s.AdminAddr().String(),
		"mode", s.cfg.Mode, "base_url", s.cfg.BaseURL, "upstream", s.cfg.Upstream, "database", dbName(s.db), "keys", s.st.keys().Len())

	// The admin listener outlives the main one so /readyz reports 503
	// while requests drain.
	adminCtx, stopAdmin := context.WithCancel(context.Background())
	adminErr := make(chan error, 1)
	go func() { adminErr <- s.admin.Run(adminCtx) }()
	if s.ready != nil {
		s.ready()
	}
	// The outbox worker delivers until the requests that queue mail are
	// done; what it has not sent stays queued for the next start.
	mailCtx, stopMail := context.WithCancel(context.Background())
	mailDone := make(chan struct{})
	go func() {
		defer close(mailDone)
		if s.mail != nil {
			s.mail.worker.Run(mailCtx)
		}
	}()
	// The sweeper has nothing to finish: what a run leaves, the next
	// start's runs take.
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		if s.sweep != nil {
			s.sweep.Run(ctx)
		}
	}()
	err := s.public.Run(ctx)
	<-sweepDone
	// A reload under way ends before anything below closes; none applies
	// after this.
	s.st.close()
	if s.st.issuer != nil {
		s.st.issuer.Drain() // mail queued after its request was answered
	}
	stopMail()
	<-mailDone
	stopAdmin()
	if aerr := <-adminErr; err == nil {
		err = aerr
	}
	if err == nil {
		s.log.Info("stopped")
	}
	return err
}

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

// dbName names the database for the start-up log line (never a password).
func dbName(db *sqlstore.DB) string {
	if db == nil {
		return "none"
	}
	return db.String()
}
