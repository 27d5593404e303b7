package sidecar

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/server"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// BenchmarkServeBusiness drives authenticated business GETs over loopback
// keep-alive connections through the production stack as serve wires it
// (tracker, middleware, proxy, a real upstream), for profiling:
// go test -run XXX -bench ServeBusiness -cpuprofile cpu.out ./cmd/authsidecar
// BenchmarkServeBare is the same load through a bare ReverseProxy, so the
// two ns/op compare in one process, with less noise than the load
// benchmark (which is the one that reports).
func BenchmarkServeBusiness(b *testing.B) {
	up := benchUpstream()
	defer up.Close()
	cfg := config.Default()
	cfg.Upstream = up.URL
	cfg.Database.Path = filepath.Join(b.TempDir(), "auth.db")
	db, err := sqlstore.OpenSQLite(context.Background(), cfg.Database.Path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	reg := prometheus.NewRegistry()
	countQueries(db, reg)
	lg := newLogs(cfg.Log, io.Discard) // production defaults: JSON access log on
	st, err := buildStack(context.Background(), cfg, config.NewSecret(e2eSecret), db, lg, reg, nil, os.Getenv)
	if err != nil {
		b.Fatal(err)
	}
	tr := server.NewTracker()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := newHTTPServer(tr.Middleware(st.handler), lg.log)
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	res, err := http.Post(base+"/api/auth/sign-up/email", "application/json", strings.NewReader(`{"name":"B","email":"b@example.com","password":"correct-horse-battery"}`))
	if err != nil {
		b.Fatal(err)
	}
	res.Body.Close()
	req, _ := http.NewRequest("GET", base+"/api/auth/get-session", nil)
	req.AddCookie(res.Cookies()[0])
	gs, _ := http.DefaultClient.Do(req)
	gs.Body.Close()
	jwt := gs.Header.Get("Set-Auth-Jwt")
	driveBusiness(b, base, jwt)
}

func BenchmarkServeBare(b *testing.B) {
	up := benchUpstream()
	defer up.Close()
	target, _ := url.Parse(up.URL)
	rp := &httputil.ReverseProxy{
		Rewrite:    func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:  &http.Transport{MaxIdleConnsPerHost: 512, DisableCompression: true},
		BufferPool: benchPool{},
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	// The same header the sidecar gets, so both parse the same request.
	driveBusiness(b, "http://"+ln.Addr().String(), benchJWT)
}

// benchJWT is a realistic token (the size of one the issuer signs); the
// bare proxy forwards it without looking at it.
var benchJWT = strings.Repeat("x", 36) + "." + strings.Repeat("y", 400) + "." + strings.Repeat("z", 86)

type benchPool struct{}

var benchBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (benchPool) Get() []byte  { return *benchBuffers.Get().(*[]byte) }
func (benchPool) Put(b []byte) { benchBuffers.Put(&b) }

func benchUpstream() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
}

// driveBusiness sends GET /api/tasks with the Bearer token from 16
// keep-alive connections, b.N requests in all.
func driveBusiness(b *testing.B, base, jwt string) {

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ResetTimer()
	var wg sync.WaitGroup
	work := make(chan struct{}, 1024)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", base+"/api/tasks", nil)
			req.Header.Set("Authorization", "Bearer "+jwt)
			for range work {
				res, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}()
	}
	for b.Loop() {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
}
