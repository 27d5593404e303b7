package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/authsidecar/authsidecar/internal/importgen"
	"github.com/authsidecar/authsidecar/passhash"
)

// runUsersFile is "authsidecar-bench users-file -lines N -o FILE": the
// input of the import benchmark (docs/benchmarks.md), N users as a legacy
// application would export them, their hashes passhash's test vectors.
func runUsersFile(_ context.Context, args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("users-file", flag.ContinueOnError)
	flags.SetOutput(stderr)
	lines := flags.Int("lines", 1_000_000, "users to write")
	out := flags.String("o", "", "file to write: .jsonl or .csv")
	vectors := flags.String("vectors", "passhash/testdata", "directory of passhash's test vectors")
	weak := flags.Bool("weak", false, "include the weak formats (import with -allow-weak-hashes)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	csv := len(*out) > 4 && (*out)[len(*out)-4:] == ".csv"
	if flags.NArg() > 0 || *lines < 1 || *out == "" {
		return fmt.Errorf("%w: users-file -lines N -o FILE.jsonl|FILE.csv", errUsage)
	}
	vs, err := importgen.LoadVectors(*vectors, func(f string) bool { return *weak || !passhash.Format(f).Weak() })
	if err != nil {
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := importgen.Write(w, 0, *lines, vs, csv); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d users to %s\n", *lines, *out)
	return nil
}
