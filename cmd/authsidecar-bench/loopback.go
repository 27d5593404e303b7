package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"
)

// loopbackAddr checks that addr is host:port on 127.0.0.1: the benchmark
// never listens on, or sends to, anything else.
func loopbackAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	if host != "127.0.0.1" {
		return fmt.Errorf("%q: only 127.0.0.1 is allowed", addr)
	}
	return nil
}

// loopbackURL parses raw, which must be an http URL on 127.0.0.1.
func loopbackURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" {
		return nil, fmt.Errorf("%q: want http://127.0.0.1:PORT", raw)
	}
	if err := loopbackAddr(u.Host); err != nil {
		return nil, err
	}
	return u, nil
}

// freePort returns a port on 127.0.0.1 that was free a moment ago, for
// the sidecar, whose listen address must be written in its config.
func freePort() (string, error) {
	ports, err := freePorts(1)
	if err != nil {
		return "", err
	}
	return ports[0], nil
}

// freePorts returns n distinct free loopback addresses. The listeners stay
// open until all n are chosen: closed one by one, the kernel may hand the
// same port out twice (a sidecar then got listen == metrics.listen).
func freePorts(n int) ([]string, error) {
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// childContext is ctx, also canceled when stdin reaches EOF: the benchmark
// holds the other end of that pipe, so a child outlives it by no more than
// a read.
func childContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return ctx, cancel
}

// serveUntil serves h on listen (127.0.0.1 only), announces "listening
// ADDR" on stdout, and shuts down when ctx ends.
func serveUntil(ctx context.Context, listen string, h http.Handler, stdout, stderr io.Writer) error {
	if err := loopbackAddr(listen); err != nil {
		return fmt.Errorf("%w: -listen %w", errUsage, err)
	}
	ctx, cancel := childContext(ctx)
	defer cancel()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "listening %s\n", ln.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
