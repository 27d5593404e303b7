package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sidecar"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// adminEnv is what an admin command works on: the config, the secret when
// the command needs it, and the open database.
type adminEnv struct {
	cfg    config.Config
	secret config.Secret // zero unless asked for
	db     *sqlstore.DB
}

// openAdmin loads the config (and the secret when withSecret) and opens the
// database, which must already exist: an admin command pointed at the
// wrong file should fail, not create an empty database and report on it.
func openAdmin(ctx context.Context, e *cliEnv, withSecret bool) (*adminEnv, error) {
	return openAdminDB(ctx, e, withSecret, false)
}

// openAdminDB is openAdmin that, when create, also creates a missing
// SQLite file: the target of db copy, where a new file is what is meant.
func openAdminDB(ctx context.Context, e *cliEnv, withSecret, create bool) (*adminEnv, error) {
	a := &adminEnv{}
	var err error
	if withSecret {
		a.cfg, err = config.Load(e.configPath)
		if err == nil {
			a.secret, err = a.cfg.LoadSecret(e.getenv)
		}
	} else {
		a.cfg, err = config.Load(e.configPath)
	}
	if err != nil {
		return nil, err
	}
	switch a.cfg.Database.Driver {
	case config.DriverNone:
		return nil, fmt.Errorf("%s has no database (database.driver none): run admin commands with a config of the issuers' database", e.configPath)
	case config.DriverSQLite:
		if _, err := os.Stat(a.cfg.Database.Path); errors.Is(err, fs.ErrNotExist) && !create {
			return nil, fmt.Errorf("database %s does not exist (serve creates it): is -config %s the right file?", a.cfg.Database.Path, e.configPath)
		}
	}
	if a.db, err = sidecar.OpenStore(ctx, a.cfg, e.getenv); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *adminEnv) Close() error { return a.db.Close() }

// normEmail is how emails are stored: lower case.
func normEmail(s string) string { return strings.ToLower(s) }

// notFound turns the store's ErrNotFound for an email into one clear line.
func notFound(err error, email string) error {
	if errors.Is(err, issuer.ErrNotFound) {
		return fmt.Errorf("no user with email %s", printable(email))
	}
	return err
}

var roleRE = regexp.MustCompile(`^[a-z0-9_-]+$`)

func checkRole(role string) error {
	if !roleRE.MatchString(role) {
		return fmt.Errorf("%w: role %s: want [a-z0-9_-]+", errUsage, printable(role))
	}
	return nil
}

// printable quotes s when it holds anything a terminal could interpret
// (control characters, escape sequences): names are user input.
func printable(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// timeText is how the CLI prints instants: UTC, to the second.
func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05Z")
}
