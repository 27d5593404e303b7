package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/proxy"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// loadConfig reads the config file and, when the mode needs it, the
// secret.
func loadConfig(e *cliEnv) (config.Config, config.Secret, error) {
	cfg, secret, _, err := loadConfigHash(e)
	return cfg, secret, err
}

// loadConfigHash is loadConfig that also returns the file's fileHash.
func loadConfigHash(e *cliEnv) (config.Config, config.Secret, string, error) {
	data, err := os.ReadFile(e.configPath)
	if err != nil {
		return config.Config{}, config.Secret{}, "", fmt.Errorf("config: %w", err)
	}
	cfg, err := config.Parse(e.configPath, data)
	if err != nil {
		return config.Config{}, config.Secret{}, "", err
	}
	if !cfg.NeedsSecret() {
		return cfg, config.Secret{}, fileHash(data), nil
	}
	secret, err := cfg.LoadSecret(e.getenv)
	if err != nil {
		return config.Config{}, config.Secret{}, "", err
	}
	return cfg, secret, fileHash(data), nil
}

// logs are the process log and the access log (nil when off), writing to
// one destination. level is the process log's, changed by a reload.
type logs struct {
	log    *slog.Logger
	access proxy.AccessLog
	level  *slog.LevelVar
	w      io.Writer
}

func newLogs(cfg config.Log, w io.Writer) logs {
	level := new(slog.LevelVar)
	level.Set(logLevel(cfg.Level))
	lg := logs{log: leveledLogger(cfg.Format, level, w), level: level, w: w}
	lg.access = lg.accessFor(cfg)
	return lg
}

// accessFor is the access log cfg asks for: off when log.access is false
// or log.level is above info (its lines are info).
func (lg logs) accessFor(cfg config.Log) proxy.AccessLog {
	switch {
	case !cfg.Access || logLevel(cfg.Level) > slog.LevelInfo:
		return nil
	case cfg.Format == config.FormatJSON:
		return proxy.JSONAccessLog(lg.w, lg.log)
	}
	return proxy.SlogAccessLog(lg.log)
}

func logLevel(name config.LogLevel) slog.Level {
	switch name {
	case config.LevelDebug:
		return slog.LevelDebug
	case config.LevelWarn:
		return slog.LevelWarn
	case config.LevelError:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func newLogger(cfg config.Log, w io.Writer) *slog.Logger {
	return leveledLogger(cfg.Format, logLevel(cfg.Level), w)
}

func leveledLogger(format config.LogFormat, level slog.Leveler, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == config.FormatText {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// openStore opens the configured database, or returns nil for driver
// none (a verifier without one). Errors name the database, never its
// password.
func openStore(ctx context.Context, cfg config.Config, getenv func(string) string) (*sqlstore.DB, error) {
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

// issuerOptions maps the config onto the issuer: the issuer never sees
// the config type, so a config change stops here.
func issuerOptions(cfg config.Config, secret config.Secret, store issuer.Store, log *slog.Logger) issuer.Options {
	return issuer.Options{
		Store:             store,
		Secret:            secret.Bytes(),
		BaseURL:           cfg.BaseURL,
		JWTIssuer:         cfg.JWTIssuer(),
		TrustedOrigins:    cfg.Auth.TrustedOrigins,
		JWTTTL:            cfg.Auth.JWTTTL.D(),
		SessionTTL:        cfg.Auth.SessionTTL.D(),
		SessionUpdateAge:  cfg.Auth.SessionUpdateAge.D(),
		CookieName:        cfg.Auth.CookieName,
		CookieSameSite:    sameSite(cfg.Auth.CookieSameSite),
		MinPasswordLength: cfg.Auth.MinPasswordLength,
		MaxPasswordLength: cfg.Auth.MaxPasswordLength,
		Limits:            issuerLimits(cfg.Limits),
		Recovery: issuer.RecoveryOptions{
			ResetTokenTTL:            cfg.Auth.ResetTokenTTL.D(),
			VerificationTokenTTL:     cfg.Auth.VerificationTokenTTL.D(),
			RequireEmailVerification: cfg.Auth.RequireEmailVerification,
			SendOnSignin:             cfg.Auth.SendVerificationOnSignin,
			KeepSessionsOnReset:      !cfg.Auth.RevokeSessionsOnPasswordReset,
			ResetPage:                cfg.Auth.ResetPageURL,
		},
		Logger: log,
	}
}

// issuerLimits is config's limits as the issuer takes them, at start and
// on reload.
func issuerLimits(l config.Limits) issuer.Limits {
	return issuer.Limits{
		BodyBytes:               l.BodyBytes,
		PasswordHashConcurrency: l.PasswordHashConcurrency,
		SignInPerIP:             issuer.Rate(l.SigninPerIP),
		SignInPerEmail:          issuer.Rate(l.SigninPerEmail),
		SignUpPerIP:             issuer.Rate(l.SignupPerIP),
		MailPerIP:               issuer.Rate(l.MailPerIP),
		MailPerEmail:            issuer.Rate(l.MailPerEmail),
		TokenPerIP:              issuer.Rate(l.TokenPerIP),
	}
}

func sameSite(s config.SameSite) http.SameSite {
	switch s {
	case config.SameSiteStrict:
		return http.SameSiteStrictMode
	case config.SameSiteNone:
		return http.SameSiteNoneMode
	}
	return http.SameSiteLaxMode
}
