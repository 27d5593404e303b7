// Command authsidecar-bench is the reproducible load benchmark of
// authsidecar (issue 6).
//
// It builds the real authsidecar binary, starts as separate processes on
// 127.0.0.1 a trivial upstream, a bare httputil.ReverseProxy baseline and
// "authsidecar serve" on a temporary database, signs up users, fetches real
// JWTs, then drives keep-alive load against the bare proxy and the sidecar
// in turn (A B A B ...) and prints one markdown table: medians per scenario
// and the sidecar/bare ratio of each (and, for c, sidecar/floor). Besides full-mode sidecars on SQLite
// it measures a verifier-mode sidecar (keys from a full sidecar's JWKS) and
// full sidecars on PostgreSQL (a throwaway cluster, or -database-url).
//
// Usage:
//
//	go run ./cmd/authsidecar-bench [-duration 4s] [-runs 3] [-connections 32] [-scenarios a,b,...] [-smoke] [-json FILE] [-db PATH] [-database-url URL]
//	go run ./cmd/authsidecar-bench seed -users N -db PATH
//	go run ./cmd/authsidecar-bench users-file -lines N -o FILE.jsonl|FILE.csv
//
// "upstream", "bare" and "floor" are hidden modes: the benchmark runs its
// own binary in them as the upstream, the baseline proxy, and the baseline
// plus one Ed25519 verification per request (scenario c's floor).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signalContext()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "authsidecar-bench:", err)
		}
		if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// signalContext ends on Ctrl-C or SIGTERM; everything started stops.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// errUsage marks command-line mistakes (exit status 2).
var errUsage = errors.New("usage")

// run dispatches on the first argument: a mode name, or the benchmark
// itself with its flags.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "upstream":
			return runUpstream(ctx, args[1:], stdout, stderr)
		case "bare":
			return runBare(ctx, args[1:], stdout, stderr)
		case "floor":
			return runFloor(ctx, args[1:], stdout, stderr)
		case "seed":
			return runSeed(ctx, args[1:], stdout, stderr)
		case "users-file":
			return runUsersFile(ctx, args[1:], stdout, stderr)
		}
	}
	o, err := parseBenchFlags(args, stderr)
	if err != nil {
		return err
	}
	return runBench(ctx, o, stdout, stderr)
}
