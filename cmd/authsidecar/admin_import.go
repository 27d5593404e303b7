package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/sqlstore"
	"github.com/authsidecar/authsidecar/userimport"
)

// importFlags are "users import"'s own flags.
type importFlags struct {
	format     string
	dryRun     bool
	onConflict string
	maxErrors  int
	allowWeak  bool
}

func defineImportFlags(fs *flag.FlagSet, e *cliEnv) {
	fs.StringVar(&e.imp.format, "format", "", "`jsonl` or csv; by default from FILE's extension (.jsonl, .ndjson, .csv)")
	fs.BoolVar(&e.imp.dryRun, "dry-run", false, "check every line, against the database too, and write nothing")
	fs.StringVar(&e.imp.onConflict, "on-conflict", "fail", "the `mode` for a line whose id or email exists: fail (refuse the line), skip or update")
	fs.IntVar(&e.imp.maxErrors, "max-errors", 100, "stop once `N` lines were refused; 0: never")
	fs.BoolVar(&e.imp.allowWeak, "allow-weak-hashes", false, "accept unsalted or salted MD5, SHA-1 and SHA-256 password hashes")
}

// cmdUsersImport imports users from a JSON Lines or CSV file (or stdin),
// with their ids, password hashes and roles.
func cmdUsersImport(ctx context.Context, e *cliEnv, args []string) error {
	o, err := importOptions(e.imp, args[0])
	if err != nil {
		return err
	}
	in, size := e.stdin, int64(0)
	if args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		defer f.Close()
		if info, err := f.Stat(); err == nil && info.Mode().IsRegular() {
			size = info.Size()
		}
		in = f
	}
	if !o.DryRun {
		if err := sqliteIdle(e.configPath); err != nil {
			return err
		}
	}
	a, err := openAdmin(ctx, e, false)
	if err != nil {
		return err
	}
	defer a.Close()
	var bar *userimport.Bar
	if terminal(e.stderr) {
		bar = userimport.NewBar(e.stderr, size, nil)
		o.Progress = bar.Update
	}
	o.Refused = func(line int, reason string) {
		if bar != nil {
			bar.Clear()
		}
		fmt.Fprintf(e.stderr, "line %d: %s\n", line, reason)
	}
	// The live heap is the batch and the hashes of the ids and emails
	// read (userimport's seen): a lower GC target keeps the process's
	// memory near it, at little cost, since those hashes hold no
	// pointers to scan.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	start := time.Now()
	sum, err := userimport.Run(ctx, in, a.db, o)
	if bar != nil {
		bar.Clear()
	}
	sum.Report(e.stdout, o.DryRun, time.Since(start))
	switch {
	case err != nil:
		return err
	case sum.Refused > 0:
		return fmt.Errorf("%s refused", plural(sum.Refused, "line"))
	}
	return nil
}

// importOptions reads the flags.
func importOptions(f importFlags, file string) (userimport.Options, error) {
	o := userimport.Options{DryRun: f.dryRun, MaxErrors: f.maxErrors, AllowWeakHashes: f.allowWeak}
	var ok bool
	if o.OnConflict, ok = userimport.ParseConflict(f.onConflict); !ok {
		return o, fmt.Errorf("%w: -on-conflict %s: want fail, skip or update", errUsage, printable(f.onConflict))
	}
	if f.maxErrors < 0 {
		return o, fmt.Errorf("%w: -max-errors %d: want 0 (never stop) or more", errUsage, f.maxErrors)
	}
	switch {
	case f.format != "":
		if o.Format, ok = userimport.ParseFormat(f.format); !ok {
			return o, fmt.Errorf("%w: -format %s: want jsonl or csv", errUsage, printable(f.format))
		}
	case file == "-":
		return o, fmt.Errorf("%w: stdin has no file extension: give -format jsonl or -format csv", errUsage)
	default:
		if o.Format, ok = userimport.FormatOf(file); !ok {
			return o, fmt.Errorf("%w: %s: the extension says neither JSON Lines (.jsonl, .ndjson) nor CSV (.csv): give -format", errUsage, printable(file))
		}
	}
	return o, nil
}

// sqliteIdle refuses a SQLite database another process has open: a
// running sidecar. An import writes for minutes, batch after batch, and
// the sidecar's own writes (sign-ups, sessions) would wait behind it or
// time out; on PostgreSQL both go on side by side. It runs before this
// process opens the database (sqlstore.SQLiteHolder's caveat).
func sqliteIdle(configPath string) error {
	cfg, err := config.Load(configPath)
	if err != nil || cfg.Database.Driver != config.DriverSQLite {
		return nil // openAdmin reports it
	}
	held, pid, err := sqlstore.SQLiteHolder(cfg.Database.Path)
	if err != nil || !held {
		return err
	}
	who := "another process"
	if pid > 0 {
		who = fmt.Sprintf("process %d", pid)
	}
	return fmt.Errorf("database %s is open in %s (a running sidecar?): stop it before importing into SQLite (-dry-run, which writes nothing, may run beside it)", cfg.Database.Path, who)
}

// terminal reports whether w is a terminal: the progress bar is drawn
// only there.
func terminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
