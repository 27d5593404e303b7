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
