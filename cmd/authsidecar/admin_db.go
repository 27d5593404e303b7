package main

import (
	"context"
	"fmt"
	"os"
)

// cmdDBBackup copies the live database to a new file.
func cmdDBBackup(ctx context.Context, e *cliEnv, args []string) error {
	file := args[0]
	if file == "-" {
		return fmt.Errorf("%w: db backup writes a file, not stdout: give a FILE name", errUsage)
	}
	a, err := openAdmin(ctx, e, false)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.db.Backup(ctx, file); err != nil {
		return err
	}
	info, err := os.Stat(file)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(e.stdout, "backed up %s to %s (%d bytes, mode %v)\n", a.cfg.Database.Path, file, info.Size(), info.Mode().Perm())
	return nil
}

// cmdDBCopy copies every user, account, session, signing key and role from
// the database of the config named by the argument into the empty database
// of -config: the move from the embedded SQLite file to PostgreSQL.
func cmdDBCopy(ctx context.Context, e *cliEnv, args []string) error {
	from := *e
	from.configPath = args[0]
	if from.configPath == e.configPath {
		return fmt.Errorf("%w: db copy needs two different configs: -config names the target, the argument the source", errUsage)
	}
	src, err := openAdmin(ctx, &from, false)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer src.Close()
	dst, err := openAdminDB(ctx, e, false, true)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer dst.Close()
	snap, err := src.db.Export(ctx)
	if err != nil {
		return fmt.Errorf("source %s: %w", src.db, err)
	}
	if err := dst.db.Import(ctx, snap); err != nil {
		return fmt.Errorf("target %s: %w (nothing was copied)", dst.db, err)
	}
	fmt.Fprintf(e.stdout, "copied %s to %s: %s, %s, %s, %s, %s, %s, %s\n", src.db, dst.db,
		plural(len(snap.Users), "user"), plural(len(snap.Accounts), "account"), plural(len(snap.Sessions), "session"),
		plural(len(snap.Keys), "signing key"), plural(len(snap.Roles), "role"),
		plural(len(snap.RecoveryTokens), "recovery token"), plural(len(snap.Outbox), "outbox message"))
	return nil
}
