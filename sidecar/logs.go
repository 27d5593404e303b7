package sidecar

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/proxy"
)

// LoadConfig reads the config file at path and, when the mode needs it,
// the secret from the environment. hash is the file's FileHash, for
// Options.ConfigHash.
func LoadConfig(path string, getenv func(string) string) (cfg config.Config, secret config.Secret, hash string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return config.Config{}, config.Secret{}, "", fmt.Errorf("config: %w", err)
	}
	if cfg, err = config.Parse(path, data); err != nil {
		return config.Config{}, config.Secret{}, "", err
	}
	if !cfg.NeedsSecret() {
		return cfg, config.Secret{}, FileHash(data), nil
	}
	if secret, err = cfg.LoadSecret(getenv); err != nil {
		return config.Config{}, config.Secret{}, "", err
	}
	return cfg, secret, FileHash(data), nil
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

// NewLogger is the process logger cfg asks for, writing to w: for the
// CLI commands, which log without a running sidecar.
func NewLogger(cfg config.Log, w io.Writer) *slog.Logger {
	return leveledLogger(cfg.Format, logLevel(cfg.Level), w)
}

func leveledLogger(format config.LogFormat, level slog.Leveler, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == config.FormatText {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
