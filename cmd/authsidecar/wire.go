package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/proxy"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// loadConfig reads the config file and, when the mode needs it, the
// secret.
func loadConfig(e *cliEnv) (config.Config, config.Secret, error) {
	cfg, err := config.Load(e.configPath)
	if err != nil {
		return config.Config{}, config.Secret{}, err
	}
	if !cfg.NeedsSecret() {
		return cfg, config.Secret{}, nil
	}
	secret, err := cfg.LoadSecret(e.getenv)
	if err != nil {
		return config.Config{}, config.Secret{}, err
	}
	return cfg, secret, nil
}

// logs are the process log and the access log (nil when off), writing to
// one destination.
type logs struct {
	log    *slog.Logger
	access proxy.AccessLog
}

func newLogs(cfg config.Log, w io.Writer) logs {
	lg := logs{log: newLogger(cfg, w)}
	switch {
	case !cfg.Access || !lg.log.Enabled(context.Background(), slog.LevelInfo):
	case cfg.Format == "json":
		lg.access = proxy.JSONAccessLog(w, lg.log)
	default:
		lg.access = proxy.SlogAccessLog(lg.log)
	}
	return lg
}

func newLogger(cfg config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	switch cfg.Level {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// openStore opens the configured database, or returns nil for driver
// none (a verifier without one). Errors name the database, never its
// password.
func openStore(ctx context.Context, cfg config.Config, getenv func(string) string) (*sqlstore.DB, error) {
	switch cfg.Database.Driver {
	case "none":
		return nil, nil
	case "postgres":
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

// issuerOptions maps the config onto the issuer: the issuer never sees
// the config type, so a config change stops here.
func issuerOptions(cfg config.Config, secret config.Secret, store issuer.Store, log *slog.Logger) issuer.Options {
	return issuer.Options{
		Store:                   store,
		Secret:                  secret.Bytes(),
		BaseURL:                 cfg.BaseURL,
		JWTIssuer:               cfg.JWTIssuer(),
		TrustedOrigins:          cfg.Auth.TrustedOrigins,
		JWTTTL:                  cfg.Auth.JWTTTL.D(),
		SessionTTL:              cfg.Auth.SessionTTL.D(),
		SessionUpdateAge:        cfg.Auth.SessionUpdateAge.D(),
		CookieName:              cfg.Auth.CookieName,
		CookieSameSite:          sameSite(cfg.Auth.CookieSameSite),
		MinPasswordLength:       cfg.Auth.MinPasswordLength,
		MaxPasswordLength:       cfg.Auth.MaxPasswordLength,
		BodyBytes:               cfg.Limits.BodyBytes,
		PasswordHashConcurrency: cfg.Limits.PasswordHashConcurrency,
		SignInPerIP:             issuer.Rate(cfg.Limits.SigninPerIP),
		SignInPerEmail:          issuer.Rate(cfg.Limits.SigninPerEmail),
		SignUpPerIP:             issuer.Rate(cfg.Limits.SignupPerIP),
		Logger:                  log,
	}
}

func sameSite(s string) http.SameSite {
	switch strings.ToLower(s) {
	case "strict":
		return http.SameSiteStrictMode
	case "none":
		return http.SameSiteNoneMode
	}
	return http.SameSiteLaxMode
}
