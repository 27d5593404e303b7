package sidecar

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// newSweeper builds the store's sweeper (sweep.interval): in full mode
// only. A verifier's database, when it has one, is its issuers', which
// sweep it; nil then.
func newSweeper(cfg config.Config, db *sqlstore.DB, log *slog.Logger, reg prometheus.Registerer) (*sqlstore.Sweeper, error) {
	if db == nil || cfg.Verifier() {
		return nil, nil
	}
	return sqlstore.NewSweeper(db, sqlstore.SweeperOptions{
		Interval: cfg.Sweep.Interval.D(), RevocationTTL: revocationTTL(cfg), Registerer: reg, Logger: log,
	})
}
