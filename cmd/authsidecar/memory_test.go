package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestMemoryBounded runs the built binary with the real scrypt cost (32 MiB
// per hash) and watches its RSS in /proc, as a container's memory limit
// would: the memory of a burst of sign-ins is back with the OS by the time
// the last one is answered, a burst of concurrent sign-ins stays within
// idle + password_hash_concurrency x 32 MiB + what its connections hold
// (connKiB each), and 1,000 keep-alive business connections starting
// right after 10 sign-ups and 10 sign-ins stay under a 128 MiB sidecar
// budget, every answer 200.
func TestMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real scrypt hashes and 1,000 connections")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc")
	}
	const (
		hashMiB     = 32  // scrypt N=16384, r=16: 128 x N x r bytes
		concurrency = 2   // limits.password_hash_concurrency, set explicitly: the formula's N
		budget      = 128 // MiB: a common sidecar container limit
		slack       = 16  // MiB: what "back to idle" and the hash bound allow on top
		// connKiB is what one waiting sign-in's connection may add: its
		// goroutine stack, bufio buffers and parsed request, with the
		// collector's headroom. Measured 38-48 KiB on a loaded 2-core VM.
		connKiB = 32
		conns   = 1000 // keep-alive business connections
	)
	up := echoUpstream(t)
	dir := t.TempDir()
	// The 1,000 connections are 1,000 clients, all from 127.0.0.1: no
	// client's share of the upstream connections applies.
	cfg, port := writeConfigFile(t, dir, "memory.yaml", fmt.Sprintf(`upstream: %q
database: { path: %q }
limits: { signin_per_ip: "off", signup_per_ip: "off", signin_per_email: "off", password_hash_concurrency: %d }
proxy: { upstream_client_share: 100%% }
`, up.URL, dir+"/auth.db", concurrency))
	p := startBinary(t, cfg, port, "AUTH_SECRET="+e2eSecret)
	pid := p.cmd.Process.Pid

	// Start-up hashed the dummy password; its memory went back to the OS
	// when that hash ended.
	idle := rss(t, pid)
	t.Logf("idle: %.1f MiB", float64(idle)/mib)

	// 10 users sign up and sign in at once, then get a JWT each.
	jwts := signInBurst(t, p.instance, "first", pid)
	afterBurst, now := hwm(t, pid), rss(t, pid)
	t.Logf("20 hashes (10 sign-ups, 10 sign-ins): peak %.1f MiB; %.1f MiB when the last one was answered", float64(afterBurst)/mib, float64(now)/mib)
	if afterBurst > idle+(concurrency*hashMiB+slack)*mib {
		t.Errorf("peak RSS during the sign-ins: %.1f MiB, want at most idle %.1f + %d x %d + %d MiB",
			float64(afterBurst)/mib, float64(idle)/mib, concurrency, hashMiB, slack)
	}
	if now > idle+slack*mib {
		t.Fatalf("RSS %.1f MiB when the last hash was answered, want within %d MiB of idle (%.1f MiB)\n%s",
			float64(now)/mib, slack, float64(idle)/mib, memStats(t, p.metrics))
	}

	// 500 concurrent sign-ins: at most password_hash_concurrency hashes
	// run, the rest wait; the hashes' memory stays bounded by the formula.
	before := rss(t, pid)
	stopBurst := make(chan struct{})
	peak := watchRSS(pid, stopBurst)
	gopeak := watchGoMemory(p.metrics, stopBurst)
	const burst = 500
	var signedIn, busy atomic.Int64
	var statusMu sync.Mutex
	statuses := map[string]int{}
	var wg sync.WaitGroup
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := http.Post(p.base+"/api/auth/sign-in/email", "application/json",
				strings.NewReader(fmt.Sprintf(`{"email":"first%d@example.com","password":"correct-horse-battery"}`, i%burstUsers)))
			if err != nil {
				t.Errorf("sign-in: %v", err)
				return
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == 200 {
				signedIn.Add(1)
				return
			}
			// Overload is answered, never an error: 503 with Retry-After
			// once the request's deadline passes in the hashing queue.
			if res.StatusCode == 503 && res.Header.Get("Retry-After") != "" && strings.Contains(string(b), `"SERVICE_UNAVAILABLE"`) {
				busy.Add(1)
				return
			}
			statusMu.Lock()
			statuses[fmt.Sprintf("%d %.80s", res.StatusCode, b)]++
			statusMu.Unlock()
		}()
	}
	wg.Wait()
	close(stopBurst)
	burstPeak := <-peak
	t.Logf("500 sign-ins, the Go runtime's largest resident memory seen (every 50 ms): %s", <-gopeak)
	t.Logf("%d concurrent sign-ins: %d ok, %d busy (503); RSS before %.1f MiB, peak %.1f MiB (bound: idle %.1f + %d x %d MiB + %d x %d KiB + %d MiB)",
		burst, signedIn.Load(), busy.Load(), float64(before)/mib, float64(burstPeak)/mib, float64(idle)/mib, concurrency, hashMiB, burst, connKiB, slack)
	if signedIn.Load()+busy.Load() != burst || signedIn.Load() == 0 {
		t.Errorf("%d of %d sign-ins succeeded, %d busy; the others: %v", signedIn.Load(), burst, busy.Load(), statuses)
	}
	if burstPeak > idle+(concurrency*hashMiB+slack)*mib+burst*connKiB<<10 {
		t.Errorf("peak RSS during %d sign-ins: %.1f MiB, want at most idle %.1f + %d x %d MiB + %d x %d KiB + %d MiB",
			burst, float64(burstPeak)/mib, float64(idle)/mib, concurrency, hashMiB, burst, connKiB, slack)
	}
	// Its 500 connections close on their own time, not with the last hash.
	if back := waitRSS(t, pid, idle+slack*mib, 5*time.Second); back < 0 {
		t.Errorf("RSS %.1f MiB 5s after the burst, want within %d MiB of idle (%.1f MiB)\n%s",
			float64(rss(t, pid))/mib, slack, float64(idle)/mib, memStats(t, p.metrics))
	}

	// 10 more sign-ups and sign-ins, and at once 1,000 keep-alive clients
	// on the business route.
	jwts = signInBurst(t, p.instance, "second", pid)
	res := businessLoad(t, p.base, pid, jwts, conns, 5*time.Second)
	t.Logf("after the load, connections open:\n%s", memStats(t, p.metrics))
	t.Logf("%d connections right after 20 hashes: %d requests, %d failed; RSS at the start %.1f MiB, peak %.1f MiB",
		conns, res.ok, res.failed, float64(res.start)/mib, float64(res.peak)/mib)
	if res.failed != 0 {
		t.Errorf("%d business requests failed (first: %v), want none", res.failed, res.firstErr)
	}
	if res.peak >= budget*mib {
		t.Errorf("peak RSS under load %.1f MiB, want under %d MiB", float64(res.peak)/mib, budget)
	}
}

// TestMemoryAgainstBareProxy holds the sidecar's peak RSS to at most twice
// a bare httputil.ReverseProxy's under the same load (the benchmark's bare
// proxy: authsidecar-bench's "bare" mode, docs/benchmarks.md): fresh
// processes, 10 sign-ups and 10 sign-ins (the bare proxy forwards them),
// then at once 64 or 1,000 keep-alive clients on the business route.
func TestMemoryAgainstBareProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real scrypt hashes, 1,000 connections and the benchmark's bare proxy")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc")
	}
	const factor = 2 // the sidecar may hold at most twice the bare proxy's memory
	up := echoUpstream(t)
	for _, conns := range []int{64, 1000} {
		t.Run(fmt.Sprintf("%d_connections", conns), func(t *testing.T) {
			dir := t.TempDir()
			// As in TestMemoryBounded: one address, as many clients as
			// connections.
			cfg, port := writeConfigFile(t, dir, "memory.yaml", fmt.Sprintf(`upstream: %q
database: { path: %q }
limits: { signin_per_ip: "off", signup_per_ip: "off", signin_per_email: "off" }
proxy: { upstream_client_share: 100%% }
`, up.URL, dir+"/auth.db"))
			p := startBinary(t, cfg, port, "AUTH_SECRET="+e2eSecret)
			pid := p.cmd.Process.Pid
			jwts := signInBurst(t, p.instance, fmt.Sprintf("side%d-", conns), pid)
			s := businessLoad(t, p.base, pid, jwts, conns, 3*time.Second)
			p.stop()

			bare, barePID := startBareProxy(t, up.URL)
			burstThrough(t, bare, fmt.Sprintf("bare%d-", conns))
			b := businessLoad(t, bare, barePID, jwts, conns, 3*time.Second) // the same bytes

			t.Logf("%d connections: peak RSS sidecar %.1f MiB (%.1f at the start), bare %.1f MiB (%.1f): %.2fx",
				conns, float64(s.peak)/mib, float64(s.start)/mib, float64(b.peak)/mib, float64(b.start)/mib, float64(s.peak)/float64(b.peak))
			if s.failed != 0 || b.failed != 0 {
				t.Errorf("failed requests: sidecar %d (first: %v), bare %d (first: %v); want none", s.failed, s.firstErr, b.failed, b.firstErr)
			}
			if s.peak > factor*b.peak {
				t.Errorf("sidecar peak RSS %.1f MiB, want at most %dx the bare proxy's %.1f MiB", float64(s.peak)/mib, factor, float64(b.peak)/mib)
			}
		})
	}
}

const mib = 1 << 20

// burstUsers sign up and then sign in, all at once: 2 x burstUsers hashes.
const burstUsers = 10

// signInBurst signs up burstUsers new users (emails tag0@example.com, ...)
// and signs each in, all at once, and returns a JWT for each. The peak
// RSS is reset first, so hwm then reads the burst's peak.
func signInBurst(t *testing.T, s *instance, tag string, pid int) []string {
	t.Helper()
	resetPeak(t, pid)
	jwts := make([]string, burstUsers)
	var wg sync.WaitGroup
	for i := range burstUsers {
		wg.Go(func() {
			email := fmt.Sprintf("%s%d@example.com", tag, i)
			res, body := post(s.base+"/api/auth/sign-up/email", fmt.Sprintf(`{"name":"N","email":%q,"password":"correct-horse-battery"}`, email))
			if res != 200 {
				t.Errorf("sign-up %s: got %d %s", email, res, body)
				return
			}
			r, b := s.do(t, "POST", "/api/auth/sign-in/email", fmt.Sprintf(`{"email":%q,"password":"correct-horse-battery"}`, email))
			if r.StatusCode != 200 || len(r.Cookies()) != 1 {
				t.Errorf("sign-in %s: got %d %s", email, r.StatusCode, b)
				return
			}
			jwts[i] = getJWT(t, s, r.Cookies()[0].Name+"="+r.Cookies()[0].Value)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return jwts
}

// burstThrough sends a bare proxy signInBurst's requests; its upstream
// answers each 200.
func burstThrough(t *testing.T, base, tag string) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range burstUsers {
		wg.Go(func() {
			email := fmt.Sprintf("%s%d@example.com", tag, i)
			for _, path := range []string{"/api/auth/sign-up/email", "/api/auth/sign-in/email"} {
				if code, body := post(base+path, fmt.Sprintf(`{"name":"N","email":%q,"password":"correct-horse-battery"}`, email)); code != 200 {
					t.Errorf("%s through the bare proxy: got %d %s", path, code, body)
				}
			}
		})
	}
	wg.Wait()
}

func post(url, body string) (int, string) {
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// loadResult is a stretch of business load: answers, and the target's
// RSS when it began and its peak during it.
type loadResult struct {
	ok, failed  int64
	firstErr    any
	start, peak uint64
}

// businessLoad opens conns keep-alive connections to base at once and sends
// GET /api/tasks with the JWTs (round-robin) until d has passed; the peak
// is VmHWM, reset when the load starts.
func businessLoad(t *testing.T, base string, pid int, jwts []string, conns int, d time.Duration) loadResult {
	t.Helper()
	r := loadResult{start: rss(t, pid)}
	resetPeak(t, pid)
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", base+"/api/tasks", nil)
			req.Header.Set("Authorization", "Bearer "+jwts[i%len(jwts)])
			for time.Now().Before(end) {
				res, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, res.Status)
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	r.ok, r.failed, r.firstErr, r.peak = ok.Load(), failed.Load(), firstErr.Load(), hwm(t, pid)
	return r
}

// resetPeak sets VmHWM back to the current RSS (Linux 4.0+).
func resetPeak(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak RSS: %v", err)
	}
}

var (
	benchOnce sync.Once
	benchPath string
	benchErr  error
)

// startBareProxy runs the benchmark's bare proxy (authsidecar-bench bare:
// httputil.ReverseProxy, tuned, no authentication) in front of upstream
// and returns its base URL and process id; it stops with the test.
func startBareProxy(t *testing.T, upstream string) (string, int) {
	t.Helper()
	benchOnce.Do(func() {
		dir := filepath.Dir(sidecarBinary(t))
		benchPath = filepath.Join(dir, "authsidecar-bench")
		if out, err := exec.Command("go", "build", "-o", benchPath, "../authsidecar-bench").CombinedOutput(); err != nil {
			benchErr = fmt.Errorf("go build ../authsidecar-bench: %v\n%s", err, out)
		}
	})
	if benchErr != nil {
		t.Fatal(benchErr)
	}
	cmd := exec.Command(benchPath, "bare", "-listen", "127.0.0.1:0", "-upstream", upstream)
	stdin, err := cmd.StdinPipe() // closing it stops the bare proxy
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		t.Fatalf("bare proxy: got %q %v, want \"listening ADDR\"", line, err)
	}
	return "http://" + addr, cmd.Process.Pid
}

// memStats is the Go runtime's memory lines from /metrics, for a failure
// message.
func memStats(t *testing.T, metrics string) string {
	res, err := http.Get(metrics + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "go_memstats_") && strings.Contains(l, "_bytes ") || strings.HasPrefix(l, "go_goroutines ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// procStatus reads one "kB" field of /proc/PID/status, in bytes.
func procStatus(t *testing.T, pid int, field string) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	v, err := statusField(b, field)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func statusField(status []byte, field string) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", field, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no %s in /proc status", field)
}

func rss(t *testing.T, pid int) uint64 { return procStatus(t, pid, "VmRSS") }
func hwm(t *testing.T, pid int) uint64 { return procStatus(t, pid, "VmHWM") }

// waitRSS polls until RSS is at most limit and returns how long that took,
// or -1 after d.
func waitRSS(t *testing.T, pid int, limit uint64, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		if rss(t, pid) <= limit {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return -1
}

// watchRSS samples RSS every 20 ms until stop closes, then sends the
// highest sample.
func watchRSS(pid int, stop chan struct{}) chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		var peak uint64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
				if v, err := statusField(b, "VmRSS"); err == nil {
					peak = max(peak, v)
				}
			}
			select {
			case <-stop:
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// watchGoMemory reads the sidecar's Go memory statistics every 50 ms
// until stop closes, then sends the sample whose resident part (heap in
// use, free heap not yet returned to the OS, stacks) was largest: when a
// peak of RSS goes over its bound, this says which part grew.
func watchGoMemory(metrics string, stop chan struct{}) chan string {
	out := make(chan string, 1)
	go func() {
		var best float64
		bestLine := "no sample"
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if v, line, ok := goMemory(metrics); ok && v > best {
				best, bestLine = v, line
			}
			select {
			case <-stop:
				out <- bestLine
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

func goMemory(metrics string) (float64, string, bool) {
	c := http.Client{Timeout: time.Second}
	res, err := c.Get(metrics + "/metrics")
	if err != nil {
		return 0, "", false
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	v := map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(l, " ")
		if !ok || strings.HasPrefix(l, "#") {
			continue
		}
		f, err := strconv.ParseFloat(val, 64)
		if err == nil {
			v[name] = f
		}
	}
	const mib = 1 << 20
	inuse, idle, released, stacks := v["go_memstats_heap_inuse_bytes"], v["go_memstats_heap_idle_bytes"], v["go_memstats_heap_released_bytes"], v["go_memstats_stack_inuse_bytes"]
	resident := inuse + idle - released + stacks
	return resident, fmt.Sprintf("%.1f MiB: heap in use %.1f, free not returned %.1f, stacks %.1f, goroutines %.0f, heap objects %.1f",
		resident/mib, inuse/mib, (idle-released)/mib, stacks/mib, v["go_goroutines"], v["go_memstats_heap_alloc_bytes"]/mib), true
}
