package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"
)

// runBare is the hidden "bare" mode: the baseline, an
// httputil.ReverseProxy with no authentication and a transport tuned the
// way any production proxy would be (enough idle connections per host that
// keep-alive load never re-dials).
func runBare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pf := addProxyFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	rp, err := pf.proxy(stderr, "bare")
	if err != nil {
		return err
	}
	return serveUntil(ctx, *pf.listen, rp, stdout, stderr)
}

// proxyFlags are the flags of the bare and floor modes, which proxy alike.
type proxyFlags struct {
	listen, upstream *string
	idle             *int
	pool             *bool
}

func addProxyFlags(fs *flag.FlagSet) proxyFlags {
	return proxyFlags{
		listen:   fs.String("listen", "127.0.0.1:0", "address to listen on (127.0.0.1 only)"),
		upstream: fs.String("upstream", "", "upstream URL, http://127.0.0.1:PORT"),
		idle:     fs.Int("idle", 1024, "idle upstream connections kept (per host)"),
		pool:     fs.Bool("buffer-pool", true, "recycle the 32 KiB copy buffers (ReverseProxy.BufferPool) instead of allocating one per response"),
	}
}

// proxy is the baseline's proxy to -upstream; name prefixes its error log.
func (pf proxyFlags) proxy(stderr io.Writer, name string) (*httputil.ReverseProxy, error) {
	u, err := loopbackURL(*pf.upstream)
	if err != nil {
		return nil, fmt.Errorf("%w: -upstream %w", errUsage, err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          *pf.idle,
			MaxIdleConnsPerHost:   *pf.idle,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: 60 * time.Second,
			DisableCompression:    true,
		},
		ErrorLog: log.New(stderr, name+": ", log.LstdFlags),
	}
	if *pf.pool {
		rp.BufferPool = &bufferPool{}
	}
	return rp, nil
}

// bufferPool is the httputil.BufferPool any tuned proxy uses: without it
// ReverseProxy allocates 32 KiB per response, and the baseline would pay
// a garbage-collection cost that has nothing to do with authentication.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
