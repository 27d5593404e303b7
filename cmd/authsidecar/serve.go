package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

func cmdServe(ctx context.Context, e *cliEnv, args []string) error {
	if err := noArgs("serve", args); err != nil {
		return err
	}
	cfg, secret, err := loadConfig(e)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, e.stderr)
	db, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	// The store is closed last, after every handler has returned.
	defer db.Close()

	st, err := buildStack(ctx, cfg, secret, db, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{
		Handler:           st.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		// OPTIONS * is ours to answer, with JSON like every other rejection.
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("listening", "addr", ln.Addr().String(), "base_url", cfg.BaseURL, "upstream", cfg.Upstream, "database", cfg.Database.Path, "keys", st.keys.Len())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", cfg.Shutdown.Grace.D().String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Shutdown.Grace.D())
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("stopped")
	return nil
}
