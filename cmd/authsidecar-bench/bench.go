package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"
)

// target is a proxy under load: the bare baseline, the floor or a
// sidecar.
type target struct {
	name string // "bare", "floor" or "sidecar"
	addr string
	pid  int
	proc *child // nil for a sidecar (its *sidecar stops it)
}

// bench holds what every scenario uses.
type bench struct {
	o        benchOptions
	logf     func(format string, args ...any)
	procs    *children
	dir      string // temporary directory: configs, logs, fresh database
	bin      string // the authsidecar binary
	db       string // the sidecar's database
	secret   string // its AUTH_SECRET
	upstream string // http://127.0.0.1:PORT of the trivial upstream
	upPID    int    // the upstream's process
	scPID    int    // the current scenario's sidecar
	auxPID   int    // the full sidecar a-verifier's keys come from (0: none)
	base     string // every sidecar's base_url (so one iss/aud for all)
	bare     target
	floor    target    // pid 0: not started (no scenario of this run has one)
	fx       *fixtures // the SQLite database's users and tokens
	pg       *benchPostgres
	pgfx     *fixtures // PostgreSQL's users (e-pg, f-pg)
	pgSkip   string    // why e-pg and f-pg are skipped ("": they run)
	report   *report
	peakNote bool // resetPeakRSS failed once: peaks are process-lifetime
	burstSeq int  // numbers the memory scenarios' sign-in bursts (fresh emails each)
}

func runBench(ctx context.Context, o benchOptions, stdout, stderr io.Writer) error {
	if runtime.GOOS != "linux" {
		return errors.New("the benchmark reads /proc: it runs on Linux only")
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	began := time.Now()
	b := &bench{o: o, logf: func(format string, args ...any) {
		fmt.Fprintf(stderr, "bench %5.1fs: %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}}

	dir, err := os.MkdirTemp("", "authsidecar-bench-")
	if err != nil {
		return err
	}
	defer func() {
		if o.Keep {
			b.logf("kept %s (config, database, logs)", dir)
		} else {
			os.RemoveAll(dir)
		}
	}()
	// Deferred before stopAll, so it runs after: the sidecars let go of
	// the database before it is dropped or its server stopped.
	defer func() {
		if b.pg != nil {
			if err := b.pg.close(); err != nil {
				b.logf("%v", err)
			}
		}
	}()
	var procs children
	defer procs.stopAll()
	b.procs, b.dir = &procs, dir
	if err := b.start(ctx); err != nil {
		return err
	}

	b.report = newReport(o)
	for _, k := range o.Scenarios {
		d := scenarioByKey(k)
		if d.postgres && b.pg == nil && b.pgSkip == "" {
			// Once, before the first PostgreSQL scenario (they run last).
			if b.pgSkip, err = b.setupPostgres(ctx); err != nil {
				return fmt.Errorf("scenario %s: %w", k, err)
			}
			if b.pg != nil {
				b.report.Settings.Postgres = b.pg.describe()
			}
		}
		if d.postgres && b.pgSkip != "" {
			b.logf("scenario %s: skipped: %s", k, b.pgSkip)
			b.report.Scenarios = append(b.report.Scenarios, scenarioReport{Key: string(k), Label: d.label, Skipped: b.pgSkip})
			continue
		}
		sr, err := b.runScenario(ctx, d)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", k, err)
		}
		b.report.Scenarios = append(b.report.Scenarios, sr)
	}
	if b.peakNote {
		b.report.Notes = append(b.report.Notes, "peak RSS could not be reset per run (/proc/PID/clear_refs): it is the process-lifetime peak, sign-ups included")
	}
	b.report.finish(time.Since(began))
	b.logf("done in %.0fs", time.Since(began).Seconds())
	return b.report.write(o.JSON, stdout)
}

// start builds the sidecar, starts the upstream and the bare proxy, and
// prepares the users on a sidecar used for setup only.
func (b *bench) start(ctx context.Context) error {
	var err error
	if b.bin = b.o.SidecarBin; b.bin == "" {
		b.logf("building ./cmd/authsidecar")
		if b.bin, err = buildSidecar(ctx, b.dir); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	up, upAddr, err := startChild(ctx, childSpec{name: "upstream", path: self,
		args: []string{"upstream", "-listen", "127.0.0.1:0"}, log: filepath.Join(b.dir, "upstream.log"), announce: true})
	if err != nil {
		return err
	}
	b.procs.add(up)
	b.upstream, b.upPID = "http://"+upAddr, up.pid()
	if b.bare, err = b.startBare(ctx, "bare"); err != nil {
		return err
	}

	b.db, b.secret = filepath.Join(b.dir, "authsidecar.db"), newSecret()
	seeded := 0
	if b.o.DB != "" {
		b.db = b.o.DB
		if seeded, err = countUsers(ctx, b.db); err != nil {
			return err
		}
		b.logf("database %s: %d users", b.db, seeded)
		// Signing keys are sealed with the secret: a kept database keeps
		// its secret beside it, or every run would add a key.
		if b.secret, err = dbSecret(b.db); err != nil {
			return err
		}
	}
	b.logf("starting a sidecar for setup (upstream %s, bare proxy %s)", upAddr, b.bare.addr)
	sc, err := b.startSidecar(ctx, sidecarConfig{name: "setup", access: true})
	if err != nil {
		return err
	}
	defer sc.stop()
	verb := "signing up"
	if seeded > 0 {
		verb = "signing in"
	}
	b.logf("%s %d users (%d at a time, scrypt), then fetching %d JWTs", verb, b.o.Users, setupConcurrency, b.o.Tokens)
	t0 := time.Now()
	client := newSetupClient()
	defer client.CloseIdleConnections()
	cookies, err := prepareUsers(ctx, client, "http://"+sc.addr, b.o.Users, seeded)
	if err != nil {
		return fmt.Errorf("preparing users: %w (%s)", err, logTail(sc.log))
	}
	jwts, err := fetchJWTs(ctx, sc.addr, cookies, b.o.Tokens, time.Minute)
	if err != nil {
		return fmt.Errorf("fetching JWTs: %w (%s)", err, logTail(sc.log))
	}
	if len(jwts) < b.o.Tokens {
		return fmt.Errorf("fetching JWTs: got %d of %d within a minute", len(jwts), b.o.Tokens)
	}
	b.fx = &fixtures{jwts: jwts, cookies: cookies, signIns: max(seeded, b.o.Users), password: benchPassword}
	b.logf("%d users and %d JWTs ready in %.1fs", b.o.Users, len(jwts), time.Since(t0).Seconds())
	if slices.ContainsFunc(b.o.Scenarios, func(k scenarioKey) bool { return scenarioByKey(k).floor }) {
		return b.startFloor(ctx, self, sc.addr)
	}
	return nil
}

// settle is the pause before each run, so the tail of the previous one
// (a queued scrypt hash, a closing connection) is not measured.
func (b *bench) settle() time.Duration {
	return min(max(b.o.Duration/20, 20*time.Millisecond), 100*time.Millisecond)
}

// conns is a scenario's number of connections.
func (b *bench) conns(sd scenarioDef) int {
	if sd.conns > 0 {
		if b.o.Smoke { // a smoke run checks that it works, quickly
			return min(sd.conns, 4*b.o.Connections)
		}
		return sd.conns
	}
	if sd.maxConns > 0 {
		return min(b.o.Connections, sd.maxConns)
	}
	return b.o.Connections
}

func (b *bench) runScenario(ctx context.Context, d scenarioDef) (scenarioReport, error) {
	if d.memory {
		return b.runMemory(ctx, d)
	}
	dur := time.Duration(float64(b.o.Duration) * d.weight)
	sr := scenarioReport{Key: string(d.key), Label: d.label, Baseline: d.bare, Seconds: dur.Seconds(), Connections: b.conns(d)}
	if d.effect {
		b.logf("scenario %s: %d sign-outs, each timed to its 401 on the sidecar and on a verifier", d.key, effectTrials)
		e, err := b.measureEffect(ctx)
		if err != nil {
			return sr, err
		}
		sr.Effect = &e
		b.logf("  %s: median %.0f ms, max %.0f ms on the sidecar; median %.0f ms, max %.0f ms on the verifier", d.key, e.SelfMedian, e.SelfMax, e.OtherMedian, e.OtherMax)
		return sr, nil
	}
	if d.revocations {
		n := b.heldRevocations()
		b.logf("scenario %s: inserting %d revocations", d.key, n)
		if err := seedRevocations(ctx, b.db, n); err != nil {
			return sr, err
		}
		defer func() {
			if err := clearRevocations(context.WithoutCancel(ctx), b.db); err != nil {
				b.logf("scenario %s: %v", d.key, err)
			}
		}()
		if b.o.Smoke {
			sr.Notes = append(sr.Notes, fmt.Sprintf("smoke: %d revocations held, not a million", n))
		}
	}
	if d.key == scenNewToken {
		if err := b.fillPool(ctx, dur, &sr); err != nil {
			return sr, err
		}
	}
	cfg, fx := sidecarConfig{name: string(d.key), access: d.key != scenBusinessNoLog}, b.fx
	switch {
	case d.verifier:
		// The keys' source: a full sidecar on the same database, idle
		// while it waits for the verifier's next fetch (keys.max_age).
		iss, err := b.startSidecar(ctx, sidecarConfig{name: string(d.key) + "-issuer", access: true})
		if err != nil {
			return sr, err
		}
		defer iss.stop()
		b.auxPID = iss.pid()
		defer func() { b.auxPID = 0 }()
		cfg.jwksURL = "http://" + iss.addr + "/api/auth/jwks"
	case d.postgres:
		cfg.pgURL, fx = b.pg.url, b.pgfx
		sr.DBCPU = b.pg.pid != 0
	}
	proc, err := b.startSidecar(ctx, cfg)
	if err != nil {
		return sr, err
	}
	defer proc.stop()
	sc := target{name: "sidecar", addr: proc.addr, pid: proc.pid()}
	if b.o.AA && (d.bare || d.floor) {
		// The same binary and flags as the baseline, started the same
		// way: any ratio but 1.00x is the method's.
		if sc, err = b.startBare(ctx, "bare-aa-"+string(d.key)); err != nil {
			return sr, err
		}
		sc.name = "sidecar"
	}
	b.scPID = sc.pid
	targets := []target{sc}
	switch {
	case d.floor:
		targets = []target{b.bare, b.floor, sc}
	case d.bare:
		targets = []target{b.bare, sc}
	}
	b.logf("scenario %s: %d run(s) of %v per target", d.key, b.o.Runs, dur)
	if b.o.Warmup > 0 {
		for _, t := range targets {
			gen := fx.generatorFor(d.stream(), t.addr, t.name == "sidecar")
			if d.key == scenNewToken {
				gen = b.fx.generatorFor(scenBusiness, t.addr, true) // do not use up the pool
			}
			if _, err := runLoad(ctx, loadSpec{addr: t.addr, conns: b.conns(d), duration: b.o.Warmup, next: gen, tunnel: d.tunnel}, probe{}); err != nil {
				return sr, fmt.Errorf("warm-up on %s: %w", t.name, err)
			}
		}
	}
	for run := range b.o.Runs {
		for _, t := range targets { // interleaved: bare, [floor,] sidecar, bare, ...
			rs, err := b.measure(ctx, d, fx, t, dur)
			if err != nil {
				return sr, err
			}
			rs.Run = run + 1
			sr.Runs = append(sr.Runs, rs)
			b.logf("  %s run %d %-7s %8.0f req/s  p99 %-8s errors %d  (other load %.0f%%)", d.key, run+1, t.name, rs.RPS, fmtLatency(rs.P99us), rs.errorCount(), rs.OtherCPUPct+rs.StealPct)
		}
	}
	if d.key == scenNewToken {
		p := b.fx.pool
		taken, reused := p.taken.Load(), p.reused()
		note := fmt.Sprintf("c: %d fresh JWTs fetched before the runs, the sidecar's runs sent %d: ", len(p.tokens), taken)
		if reused == 0 {
			note += "every request carried a token never sent before"
		} else {
			note += fmt.Sprintf("the pool ran out, %d requests (%.1f%%) carried a token already sent (a cache hit, not a miss)",
				reused, 100*float64(reused)/float64(taken))
		}
		sr.Notes = append(sr.Notes, note)
	}
	sr.summarize()
	if sr.Sidecar.Errors > 0 {
		sr.Notes = append(sr.Notes, fmt.Sprintf("%s: the sidecar's log says: %s", d.key, firstLogError(proc.log)))
	}
	return sr, nil
}
