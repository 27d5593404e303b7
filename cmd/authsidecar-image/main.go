// Command authsidecar-image builds authsidecar's container image without a
// Docker daemon: a static binary (CGO_ENABLED=0, -trimpath) and the build
// machine's CA certificates on an empty base, no shell, run as the
// unprivileged user 65532, `serve -config /etc/authsidecar/sidecar.yaml`
// by default. It writes the image as a tarball that `docker load`,
// `podman load`, `kind load image-archive` and `crane push` take.
//
// From the repository's root:
//
//	go run ./cmd/authsidecar-image                 # out/authsidecar-image.tar
//	go run ./cmd/authsidecar-image -arch arm64 -o out/arm64.tar
//
// The same source, Go and CA bundle give the same bytes: every timestamp is
// the commit's time (or SOURCE_DATE_EPOCH), and the binary is built with
// -trimpath.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "authsidecar-image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("authsidecar-image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := options{}
	fs.StringVar(&opts.out, "o", "out/authsidecar-image.tar", "the image tarball to write")
	fs.StringVar(&opts.ref, "tag", DefaultRef, "the image's name in the tarball (what docker load tags it)")
	fs.StringVar(&opts.arch, "arch", runtime.GOARCH, "GOARCH of the binary and the image (linux only)")
	fs.StringVar(&opts.caFile, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle copied into the image")
	fs.StringVar(&opts.src, "C", ".", "the repository's root (the module to build)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: go run ./cmd/authsidecar-image [-o FILE] [-tag REF] [-arch GOARCH] [-ca-certs FILE] [-C DIR]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	opts.sourceDateEpoch = getenv("SOURCE_DATE_EPOCH")
	res, err := build(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s %s, linux/%s, %s\n", opts.out, opts.ref, res.digest, opts.arch, res.version)
	return nil
}
