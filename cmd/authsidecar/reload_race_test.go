package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReloadRace reloads the in-process sidecar (POST /-/reload) while
// clients use it, changing every kind of reloadable key: under -race it
// checks the swap and the setters (key cache timings, log level) share no
// memory unsafely; every request must still succeed.
func TestReloadRace(t *testing.T) {
	up := echoUpstream(t)
	f := newReloadFile(t, up.URL)
	configs := []string{
		"auth: { trusted_origins: [\"https://a.example.com\"] }\nkeys: { max_age: 10m, cooldown: 30s }\nproxy: { allowed_hosts: [\"127.0.0.1\"], strip_headers: [X-Route] }\nroutes: { passthrough: [/ws/browser, /public/] }\nlimits: { signup_per_ip: 100/m, password_hash_concurrency: 1 }\n",
		"auth: { trusted_origins: [\"https://b.example.com\"] }\nkeys: { max_age: 5m, cooldown: 10s }\nproxy: { trusted_proxies: [10.0.0.0/8], forward_authorization: true }\ncors: { allow_credentials: false, max_age: 0s }\n",
	}
	f.write(t, configs[0])
	s := startSidecar(t, f.path, f.port, e2eSecret)
	_, jwt := signUp(t, s, "race@example.com", "correct-horse-battery")

	var (
		stop     atomic.Bool
		failures atomic.Int64
		wg       sync.WaitGroup
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				req, _ := http.NewRequest("GET", s.base+"/api/tasks", nil)
				req.Header.Set("Authorization", "Bearer "+jwt)
				if i%3 == 0 {
					req, _ = http.NewRequest("GET", s.base+"/api/auth/ok", nil)
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					failures.Add(1)
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					failures.Add(1)
				}
			}
		}()
	}
	admin := &instance{base: s.metrics}
	for i := range 10 {
		f.log = []string{"{ format: json, level: debug }", "{ format: json, level: info, access: false }"}[i%2]
		f.write(t, configs[(i+1)%2])
		if res, body := admin.do(t, "POST", "/-/reload", ""); res.StatusCode != 200 {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("reload %d: got %d %s, want 200", i+1, res.StatusCode, body)
		}
	}
	stop.Store(true)
	wg.Wait()
	if n := failures.Load(); n != 0 {
		t.Errorf("%d requests failed while reloading, want 0", n)
	}
}

// TestReloadRaceJWKS switches a verifier's keys.jwks_url back and forth
// between two issuers while clients verify: under -race it checks that a
// new key cache and verifier go in force, and the old cache is closed,
// without a data race. The issuers share their key and their auth.issuer,
// so every token is good under either URL and every request must pass.
func TestReloadRaceJWKS(t *testing.T) {
	up := echoUpstream(t)
	const issuer = "auth: { issuer: \"https://issuer.example.com\" }\n"
	issA, issB, jwtA, jwtB := twoIssuers(t, up.URL, issuer)

	path := filepath.Join(t.TempDir(), "verifier.yaml")
	port, metricsPort := freePort(t), freePort(t)
	write := func(jwksBase, maxAge string) {
		writeFile(t, path, fmt.Sprintf("mode: verifier\nlisten: \"127.0.0.1:%d\"\nmetrics: { listen: \"127.0.0.1:%d\" }\nupstream: %q\nlog: { format: json, level: info, access: false }\nkeys: { jwks_url: \"%s/api/auth/jwks\", max_age: %s }\n%s",
			port, metricsPort, up.URL, jwksBase, maxAge, issuer))
	}
	write(issA.base, "10m")
	v := startSidecar(t, path, port, "")

	var (
		stop     atomic.Bool
		failures atomic.Int64
		requests atomic.Int64
		wg       sync.WaitGroup
	)
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jwt := []string{jwtA, jwtB}[c%2]
			for !stop.Load() {
				req, _ := http.NewRequest("GET", v.base+"/api/tasks", nil)
				req.Header.Set("Authorization", "Bearer "+jwt)
				res, err := http.DefaultClient.Do(req)
				requests.Add(1)
				if err != nil {
					failures.Add(1)
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					failures.Add(1)
				}
			}
		}()
	}
	admin := &instance{base: v.metrics}
	bases := []string{issA.base, issB.base}
	for i := range 10 {
		// Let the clients through between reloads, so each switch lands
		// among requests.
		for n := requests.Load(); requests.Load() < n+20; {
			time.Sleep(time.Millisecond)
		}
		write(bases[(i+1)%2], []string{"5m", "10m"}[i%2])
		if res, body := admin.do(t, "POST", "/-/reload", ""); res.StatusCode != 200 {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("reload %d: got %d %s, want 200", i+1, res.StatusCode, body)
		}
	}
	stop.Store(true)
	wg.Wait()
	if n := failures.Load(); n != 0 {
		t.Errorf("%d of %d requests failed while jwks_url switched 10 times, want 0", n, requests.Load())
	}
	// The log is flushed every 100ms.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := strings.Count(v.stderr.String(), `"msg":"key source switched"`)
		if n == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("logged %d key source switches, want 10", n)
			break
		}
	}
	t.Logf("%d requests during 10 jwks_url switches", requests.Load())
}
