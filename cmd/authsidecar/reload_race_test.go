package main

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
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
	admin := &sidecar{base: s.metrics}
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
