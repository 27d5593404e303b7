package sidecar

import (
	"context"
	"fmt"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/sqlstore"
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
