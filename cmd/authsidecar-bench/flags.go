package main

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// benchOptions are the benchmark's settings, from its flags.
type benchOptions struct {
	Duration    time.Duration // measured window of one run of a full-weight scenario
	Runs        int           // interleaved repetitions per target
	Connections int           // concurrent keep-alive connections
	Users       int           // users signed up (or signed in, on a seeded -db)
	Tokens      int           // distinct JWTs for scenarios a, a-nolog, a-verifier, b, d
	Scenarios   []scenarioKey // in the order they run
	Warmup      time.Duration // unmeasured load before a scenario's first run on each target
	PoolTime    time.Duration // bound on fetching scenario c's token pool
	PoolMax     int           // bound on the size of that pool
	JSON        string        // file for the JSON report; "" none, "-" stdout
	DB          string        // pre-seeded database ("" a fresh temporary one)
	DatabaseURL string        // PostgreSQL server for e-pg, f-pg ("" a throwaway cluster); holds a password
	Keep        bool          // keep the temporary directory (logs, config)
	Timeout     time.Duration // hard limit on the whole run
	Smoke       bool
	AA          bool   // a second bare proxy in the sidecar's place: the method's own bias
	BarePool    bool   // the bare proxy and the floor recycle their copy buffers
	SidecarBin  string // a prebuilt authsidecar binary ("": build ./cmd/authsidecar)
}

func parseBenchFlags(args []string, stderr io.Writer) (benchOptions, error) {
	var o benchOptions
	var scenarios string
	fs := flag.NewFlagSet("authsidecar-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.Duration, "duration", 600*time.Millisecond, "measured time per run of scenarios a, a-nolog and a-verifier (b and c run 0.75x of it, d, e, f, e-pg and f-pg 0.5x)")
	fs.IntVar(&o.Runs, "runs", 21, "interleaved runs per target (bare, sidecar, bare, sidecar, ...; in c bare, floor, sidecar, ...); the median is reported, and the median of the pairs' ratios")
	fs.IntVar(&o.Connections, "connections", 32, "concurrent keep-alive connections")
	fs.IntVar(&o.Users, "users", 100, "users signed up (scrypt-bound: ~20/s on a 2-core VM), or signed in on a seeded -db; as many are signed up on PostgreSQL for e-pg and f-pg")
	fs.IntVar(&o.Tokens, "tokens", 300, "distinct JWTs used by scenarios a, a-nolog, a-verifier, b, d (get-session, round-robin over the users)")
	fs.StringVar(&scenarios, "scenarios", "all", "comma-separated scenarios to run: "+strings.Join(allScenarioKeys(), ",")+", or all")
	fs.DurationVar(&o.Warmup, "warmup", 300*time.Millisecond, "unmeasured load on each target before a scenario's first run")
	fs.DurationVar(&o.PoolTime, "pool-time", 14*time.Second, "longest time spent fetching fresh JWTs for scenario c")
	fs.IntVar(&o.PoolMax, "pool-max", 100000, "most fresh JWTs fetched for scenario c")
	fs.StringVar(&o.JSON, "json", "", "also write the results as JSON to this file (- for stdout, instead of the table)")
	fs.StringVar(&o.DB, "db", "", "run the sidecar on this database (made by the seed command) instead of a fresh one")
	fs.StringVar(&o.DatabaseURL, "database-url", os.Getenv(envDatabaseURL), "PostgreSQL server for e-pg and f-pg, postgres://user:password@host:5432/db, as a user allowed to CREATE DATABASE: the benchmark creates a database of its own there and drops it at the end (default $"+envDatabaseURL+"; empty: a throwaway cluster from Debian's binaries)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the temporary directory (sidecar logs, config) and print its path")
	fs.DurationVar(&o.Timeout, "timeout", 15*time.Minute, "hard limit on the whole run")
	fs.StringVar(&o.SidecarBin, "sidecar-bin", "", "run this authsidecar binary instead of building ./cmd/authsidecar (to compare two builds, run the benchmark with each in turn)")
	fs.BoolVar(&o.BarePool, "bare-buffer-pool", true, "give the bare proxy and the floor a ReverseProxy.BufferPool, as the sidecar has (false: stdlib defaults)")
	fs.BoolVar(&o.AA, "aa", false, "calibration: measure a second bare proxy in the sidecar's place wherever the sidecar is compared with the bare proxy (a, a-nolog, a-rev1m, b, c, d), so each sidecar/bare ratio is the method's own bias, ideally 1.00x; the goal notes do not apply")
	fs.BoolVar(&o.Smoke, "smoke", false, "a quick check that everything works (a few seconds of load): 1 run of 150ms per target, 4 connections (16 in g and g-64), 6 users, 12 JWTs; PostgreSQL scenarios included when there is a PostgreSQL")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: authsidecar-bench [flags]\n       authsidecar-bench seed -users N -db PATH\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if o.Smoke {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		smoke := func(name string, apply func()) {
			if !set[name] {
				apply()
			}
		}
		smoke("duration", func() { o.Duration = 150 * time.Millisecond })
		smoke("runs", func() { o.Runs = 1 })
		smoke("connections", func() { o.Connections = 4 })
		smoke("users", func() { o.Users = 6 })
		smoke("tokens", func() { o.Tokens = 12 })
		smoke("warmup", func() { o.Warmup = 0 })
		smoke("pool-time", func() { o.PoolTime = 2 * time.Second })
		smoke("pool-max", func() { o.PoolMax = 3000 })
	}
	keys, err := parseScenarios(scenarios)
	if err != nil {
		return o, fmt.Errorf("%w: -scenarios: %w", errUsage, err)
	}
	o.Scenarios = keys
	switch {
	case o.Duration <= 0 || o.Duration > 10*time.Minute:
		return o, fmt.Errorf("%w: -duration must be in (0, 10m]", errUsage)
	case o.Runs < 1 || o.Runs > 50:
		return o, fmt.Errorf("%w: -runs must be 1..50", errUsage)
	case o.Connections < 1 || o.Connections > 1024:
		return o, fmt.Errorf("%w: -connections must be 1..1024", errUsage)
	case o.Users < 1 || o.Users > 100000:
		return o, fmt.Errorf("%w: -users must be 1..100000", errUsage)
	case o.Tokens < 1 || o.Tokens > 1000000:
		return o, fmt.Errorf("%w: -tokens must be 1..1000000", errUsage)
	case o.Warmup < 0 || o.PoolTime < 0 || o.PoolMax < 1:
		return o, fmt.Errorf("%w: -warmup, -pool-time must be >= 0 and -pool-max >= 1", errUsage)
	case o.Timeout <= 0:
		return o, fmt.Errorf("%w: -timeout must be positive", errUsage)
	}
	if o.DatabaseURL != "" {
		// url.Parse's error would quote the URL, password and all.
		if u, err := url.Parse(o.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
			return o, fmt.Errorf("%w: -database-url (or $%s): want postgres://user:password@host:5432/db", errUsage, envDatabaseURL)
		}
	}
	if o.DB != "" {
		if o.DB, err = filepath.Abs(o.DB); err != nil {
			return o, err
		}
	}
	if o.SidecarBin != "" {
		if o.SidecarBin, err = filepath.Abs(o.SidecarBin); err != nil {
			return o, err
		}
	}
	return o, nil
}
