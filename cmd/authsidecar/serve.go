package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
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

	iss, err := issuer.New(ctx, issuerOptions(cfg, secret, db, log))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{
		Handler:           routes(iss),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		// OPTIONS * is ours to answer, with JSON like every other rejection.
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("listening", "addr", ln.Addr().String(), "base_url", cfg.BaseURL, "database", cfg.Database.Path)

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

// routes sends /api/auth and everything under it to the issuer. Other
// paths are refused until the proxy exists.
func routes(iss http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == issuer.BasePath || strings.HasPrefix(r.URL.Path, issuer.BasePath+"/") {
			iss.ServeHTTP(w, r)
			return
		}
		issuer.WriteError(w, http.StatusNotFound, "NOT_FOUND", "Not found")
	})
}
