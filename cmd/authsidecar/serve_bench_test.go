package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/server"
	"github.com/authsidecar/authsidecar/sqlite"
)

// BenchmarkServeBusiness drives authenticated business GETs over loopback
// keep-alive connections through the production stack as serve wires it
// (tracker, middleware, proxy, a real upstream), for profiling:
// go test -run XXX -bench ServeBusiness -cpuprofile cpu.out ./cmd/authsidecar
func BenchmarkServeBusiness(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	defer up.Close()
	cfg := config.Default()
	cfg.Upstream = up.URL
	cfg.Database.Path = filepath.Join(b.TempDir(), "auth.db")
	db, err := sqlite.Open(context.Background(), cfg.Database.Path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	reg := prometheus.NewRegistry()
	countQueries(db, reg)
	lg := newLogs(cfg.Log, io.Discard) // production defaults: JSON access log on
	st, err := buildStack(context.Background(), cfg, config.NewSecret(e2eSecret), db, lg, reg)
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
