package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

var (
	// errUsage marks a command-line mistake (exit status 2).
	errUsage = errors.New("usage")
	// errReported means the message was already written to stderr.
	errReported = errors.New("already reported")
)

// command is one CLI verb.
type command struct {
	name    string
	summary string
	// secret says whether the command reads AUTH_SECRET (shown in -h).
	secret bool
	run    func(ctx context.Context, e *cliEnv, args []string) error
}

// cliEnv is what a command may touch: no globals, so tests call run.
type cliEnv struct {
	getenv     func(string) string
	stdin      io.Reader
	stdout     io.Writer
	stderr     io.Writer
	configPath string
}

var commands = []command{
	{name: "serve", summary: "run the sidecar", secret: true, run: cmdServe},
	{name: "check", summary: "validate the config, open and migrate the database, decrypt the keys; report every problem", secret: true, run: cmdCheck},
	{name: "version", summary: "print the version", run: cmdVersion},
}

// run is main without the process: it parses args, runs one command and
// returns its error.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return fmt.Errorf("%w: no command given", errUsage)
		}
		return nil
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		e := &cliEnv{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
		fs := flag.NewFlagSet("authsidecar "+c.name, flag.ContinueOnError)
		fs.SetOutput(stderr)
		fs.StringVar(&e.configPath, "config", "sidecar.yaml", "configuration `file`")
		fs.Usage = func() {
			fmt.Fprintf(stderr, "Usage: authsidecar %s [-config FILE]\n\n%s.\n", c.name, c.summary)
			if c.secret {
				fmt.Fprintln(stderr, "Needs the secret in the environment variable named by auth.secret_env (default AUTH_SECRET).")
			}
			fmt.Fprintln(stderr, "\nFlags:")
			fs.PrintDefaults()
		}
		rest, err := parseFlags(fs, args[1:])
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		if err != nil {
			return err
		}
		return c.run(ctx, e, rest)
	}
	usage(stderr)
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}

// parseFlags enforces the grammar CMD [SUB] [-flags] [ARGS...]: flags come
// before positional arguments, and a flag after one is an error rather than
// a silently ignored argument.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	rest := fs.Args()
	for _, a := range rest {
		if strings.HasPrefix(a, "-") && a != "-" {
			return nil, fmt.Errorf("%w: flag %s after a positional argument: put flags before arguments", errUsage, a)
		}
	}
	return rest, nil
}

func noArgs(name string, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: %s takes no arguments, got %q", errUsage, name, args)
	}
	return nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: authsidecar CMD [SUB] [-config FILE] [ARGS...]\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'authsidecar CMD -h' for a command's flags.")
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func cmdVersion(_ context.Context, e *cliEnv, args []string) error {
	if err := noArgs("version", args); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "authsidecar", version)
	return nil
}
