package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/authsidecar/authsidecar/betterauth"
	"github.com/authsidecar/authsidecar/config"
)

// betterAuthFlags are "db import-better-auth"'s own flags.
type betterAuthFlags struct {
	from   string
	dryRun bool
}

func defineBetterAuthFlags(fs *flag.FlagSet, e *cliEnv) {
	fs.StringVar(&e.ba.from, "from", "", "Better Auth's database: `postgres://…`, sqlite:PATH, or env:NAME (the URL in $NAME, so no password shows in the process list)")
	fs.BoolVar(&e.ba.dryRun, "dry-run", false, "read Better Auth's database, report what a real run would carry and leave, and write nothing")
}

// cmdDBImportBetterAuth takes over a Better Auth database: its users with
// their ids and passwords, provider accounts, live sessions, roles and
// signing keys, into -config's empty database, in one transaction.
func cmdDBImportBetterAuth(ctx context.Context, e *cliEnv, _ []string) error {
	from := e.ba.from
	if name, ok := strings.CutPrefix(from, "env:"); ok {
		if from = e.getenv(name); from == "" {
			return fmt.Errorf("-from env:%s: $%s is not set", name, name)
		}
	}
	if from == "" {
		return fmt.Errorf("%w: -from is required: postgres://…, sqlite:PATH or env:NAME", errUsage)
	}
	cfg, err := config.Load(e.configPath)
	if err != nil {
		return err
	}
	authSecret, err := cfg.LoadSecret(e.getenv)
	if err != nil {
		return err
	}
	if cfg.Auth.BetterAuthSecretEnv == "" {
		return fmt.Errorf("%s: auth.better_auth_secret_env is empty: name the variable holding the BETTER_AUTH_SECRET Better Auth ran with (the import opens its signing keys with it, and serve then accepts its session cookies)", e.configPath)
	}
	baSecret, err := cfg.LoadBetterAuthSecret(e.getenv)
	if err != nil {
		return err
	}
	var providers []string
	for _, p := range cfg.IdentityProviders {
		providers = append(providers, p.ID)
	}
	src, err := betterauth.Open(ctx, from)
	if err != nil {
		return fmt.Errorf("-from: %w", err)
	}
	defer src.Close()
	res, err := src.Read(ctx, betterauth.Options{BetterAuthSecret: baSecret.Bytes(), AuthSecret: authSecret.Bytes(), Providers: providers})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "read %s: ", src)
	res.Report.Write(e.stdout)
	if e.ba.dryRun {
		return betterAuthTarget(ctx, e, cfg)
	}
	if err := sqliteIdle(e.configPath); err != nil {
		return err
	}
	dst, err := openAdminDB(ctx, e, false, true)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer dst.Close()
	if err := dst.db.Import(ctx, res.Snapshot); err != nil {
		return fmt.Errorf("target %s: %w (nothing was imported: import into a database no sidecar has served yet)", dst.db, err)
	}
	fmt.Fprintf(e.stdout, "imported into %s; serve with auth.better_auth_secret_env set until the imported sessions have expired\n", dst.db)
	return nil
}

// betterAuthTarget says whether a real run could write into -config's
// database: it must be empty (or, for SQLite, not exist yet).
func betterAuthTarget(ctx context.Context, e *cliEnv, cfg config.Config) error {
	if cfg.Database.Driver == config.DriverSQLite {
		if _, err := os.Stat(cfg.Database.Path); errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(e.stdout, "dry run: nothing was written; a real run creates %s and imports into it\n", cfg.Database.Path)
			return nil
		}
	}
	dst, err := openAdmin(ctx, e, false)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer dst.Close()
	if err := dst.db.CheckEmpty(ctx); err != nil {
		return fmt.Errorf("target %s: %w: a real run would refuse it (import into a database no sidecar has served yet)", dst.db, err)
	}
	fmt.Fprintf(e.stdout, "dry run: nothing was written; %s is empty, a real run imports into it\n", dst.db)
	return nil
}
