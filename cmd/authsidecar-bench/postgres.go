package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/authsidecar/authsidecar/internal/pgcluster"
)

// envDatabaseURL is the default of -database-url.
const envDatabaseURL = "AUTHSIDECAR_BENCH_DATABASE_URL"

// benchPostgres is the PostgreSQL server of scenarios e-pg and f-pg: a
// throwaway cluster from Debian's binaries, or the server -database-url
// names. Either way the benchmark works in a database of its own, created
// empty and dropped (or thrown away with the cluster) at the end.
type benchPostgres struct {
	cluster *pgcluster.Cluster // nil: the -database-url server
	admin   string             // a URL allowed to CREATE DATABASE; holds a password, never printed
	name    string             // the benchmark's database
	url     string             // its URL, the sidecars' DATABASE_URL
	version string             // server_version
	// pid is the cluster's postmaster, whose process tree's CPU is the
	// database's share of a request; 0 for a server not started here,
	// whose CPU is not measured.
	pid int
}

// pgMissing says why the PostgreSQL scenarios cannot run ("" when they
// can): neither -database-url nor Debian's binaries, which pgcluster runs.
func pgMissing(databaseURL string) string {
	if databaseURL != "" {
		return ""
	}
	if m, _ := filepath.Glob(initdbGlob); len(m) > 0 {
		return ""
	}
	return "no PostgreSQL: no " + initdbGlob + " (Debian's postgresql package) and no -database-url or $" + envDatabaseURL
}

// initdbGlob is where pgcluster finds Debian's PostgreSQL (a variable for
// the test of the skipped rows).
var initdbGlob = "/usr/lib/postgresql/*/bin/initdb"

// pgSetupTimeout bounds creating (and dropping) the benchmark's database.
const pgSetupTimeout = 30 * time.Second

// startPostgres starts a throwaway cluster (databaseURL "") or connects to
// databaseURL, and creates the benchmark's database. Errors never show
// the URL: it holds a password.
func startPostgres(ctx context.Context, databaseURL string) (_ *benchPostgres, err error) {
	p := &benchPostgres{admin: databaseURL}
	if databaseURL == "" {
		if p.cluster, err = pgcluster.New(); err != nil {
			return nil, fmt.Errorf("starting a throwaway PostgreSQL: %w", err)
		}
		p.admin = p.cluster.AdminURL()
		// pgcluster started the postmaster: it is our child.
		p.pid = childNamed(os.Getpid(), "postgres")
	}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	u, err := url.Parse(p.admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		// url.Parse's error quotes the input, password and all.
		return nil, fmt.Errorf("%w: -database-url: want postgres://user:password@host:5432/db", errUsage)
	}
	ctx, cancel := context.WithTimeout(ctx, pgSetupTimeout)
	defer cancel()
	db, err := sql.Open("pgx", p.admin)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, "SHOW server_version").Scan(&p.version); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	suffix := make([]byte, 6)
	rand.Read(suffix)
	name := "authsidecar_bench_" + hex.EncodeToString(suffix)
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("postgres: create database: %w", err)
	}
	p.name = name
	u.Path = "/" + name
	p.url = u.String()
	return p, nil
}

// describe is the server, for the report: never its URL.
func (p *benchPostgres) describe() string {
	if p.cluster != nil {
		return "PostgreSQL " + p.version + ", a throwaway cluster on this machine (fsync, synchronous_commit and full_page_writes off), database.max_conns 10"
	}
	return "PostgreSQL " + p.version + " from -database-url (its CPU not measured), database.max_conns 10"
}

// close stops the throwaway cluster, or drops the benchmark's database
// from the -database-url server. The sidecars must be stopped first.
func (p *benchPostgres) close() error {
	if p.cluster != nil {
		p.cluster.Close()
		return nil
	}
	if p.name == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgSetupTimeout)
	defer cancel()
	db, err := sql.Open("pgx", p.admin)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+p.name); err != nil {
		return fmt.Errorf("postgres: drop database %s: %w", p.name, err)
	}
	return nil
}

// setupPostgres starts PostgreSQL and signs up the -users users on it
// through a full sidecar, as the SQLite database gets them: their cookies
// are e-pg's, and f-pg signs them in. It returns why the scenarios are
// skipped ("" when they are not); an error means PostgreSQL was there but
// did not work.
func (b *bench) setupPostgres(ctx context.Context) (skip string, err error) {
	if why := pgMissing(b.o.DatabaseURL); why != "" {
		return why, nil
	}
	where := "starting a throwaway PostgreSQL cluster"
	if b.o.DatabaseURL != "" {
		where = "creating a database on -database-url's server"
	}
	b.logf("%s", where)
	t0 := time.Now()
	if b.pg, err = startPostgres(ctx, b.o.DatabaseURL); err != nil {
		return "", err
	}
	if b.pg.cluster != nil && b.pg.pid == 0 {
		b.logf("the cluster's postmaster is not among the benchmark's children: its CPU is not measured")
	}
	b.logf("%s on %s in %.1fs; signing up %d users there (%d at a time, scrypt)", b.pg.name, b.pg.describe(), time.Since(t0).Seconds(), b.o.Users, setupConcurrency)
	sc, err := b.startSidecar(ctx, sidecarConfig{name: "setup-pg", pgURL: b.pg.url, access: true})
	if err != nil {
		return "", err
	}
	defer sc.stop()
	client := newSetupClient()
	defer client.CloseIdleConnections()
	cookies, err := prepareUsers(ctx, client, "http://"+sc.addr, b.o.Users, 0)
	if err != nil {
		return "", fmt.Errorf("preparing users on PostgreSQL: %w (%s)", err, logTail(sc.log))
	}
	b.pgfx = &fixtures{cookies: cookies, signIns: b.o.Users, password: benchPassword}
	b.logf("%d users ready on PostgreSQL in %.1fs", b.o.Users, time.Since(t0).Seconds())
	return "", nil
}

// errNoPostmaster is returned by dbTicks when the server is not ours.
var errNoPostmaster = errors.New("the PostgreSQL server was not started by the benchmark")

// dbTicks is the CPU time of the cluster's processes (the postmaster and
// every backend), in clock ticks.
func (p *benchPostgres) dbTicks() (uint64, error) {
	if p == nil || p.pid == 0 {
		return 0, errNoPostmaster
	}
	return treeTicks(p.pid)
}
