package sidecar

import (
	"context"
	"fmt"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/proxy"
	"github.com/authsidecar/authsidecar/sqlstore"
	"github.com/prometheus/client_golang/prometheus"
)

// OpenStore opens the configured database, or returns nil for driver
// none (a verifier without one). Errors name the database, never its
// password.
func OpenStore(ctx context.Context, cfg config.Config, getenv func(string) string) (*sqlstore.DB, error) {
	switch cfg.Database.Driver {
	case config.DriverNone:
		return nil, nil
	case config.DriverPostgres:
		url, err := cfg.LoadDatabaseURL(getenv)
		if err != nil {
			return nil, err
		}
		db, err := sqlstore.OpenPostgres(ctx, sqlstore.PostgresOptions{URL: string(url.Bytes()), MaxConns: cfg.Database.MaxConns})
		if err != nil {
			return nil, fmt.Errorf("database: %w", err)
		}
		return db, nil
	}
	db, err := sqlstore.OpenSQLite(ctx, cfg.Database.Path)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", cfg.Database.Path, err)
	}
	return db, nil
}

// countQueries counts every store query by the route class of the request
// that caused it: the contract's "zero queries on business routes" made
// visible live (authsidecar_db_queries_total{class="business"} stays 0).
func countQueries(db *sqlstore.DB, reg prometheus.Registerer) {
	queries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "authsidecar_db_queries_total", Help: "Store queries by the route class that caused them (keyset: key cache reads; revocation: the revocation poller's reads, one per poll interval; other: start-up and background work).",
	}, []string{"class"})
	reg.MustRegister(queries)
	if db == nil {
		// Verifier mode has no store: nothing to count.
		return
	}
	// At 0 from the start: the alert that business and websocket requests
	// never query the store must match a series on a fresh process.
	for _, class := range proxy.ClassNames() {
		queries.WithLabelValues(class)
	}
	queries.WithLabelValues("other")
	db.Observe = func(ctx context.Context, _ string) {
		class := "other"
		if info := proxy.Info(ctx); info != nil {
			class = info.Class.String()
		}
		queries.WithLabelValues(class).Inc()
	}
}
