package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMemoryBounded runs the built binary with the real scrypt cost (32 MiB
// per hash) and watches its RSS in /proc, as a container's memory limit
// would: after sign-ins the memory goes back to about the idle figure, a
// burst of concurrent sign-ins stays within idle + password_hash_concurrency
// x 32 MiB + what its connections hold (connKiB each), and 1,000 keep-alive
// business connections after sign-ins stay far below a 128 MiB sidecar
// budget.
func TestMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real scrypt hashes and 1,000 connections")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc")
	}
	const (
		mib         = 1 << 20
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
	cfg, port := writeConfigFile(t, dir, "memory.yaml", fmt.Sprintf(`upstream: %q
database: { path: %q }
limits: { signin_per_ip: "off", signup_per_ip: "off", signin_per_email: "off", password_hash_concurrency: %d }
`, up.URL, dir+"/auth.db", concurrency))
	p := startBinary(t, cfg, port, "AUTH_SECRET="+e2eSecret)
	pid := p.cmd.Process.Pid

	// Start-up hashed the dummy password: its memory goes back to the OS a
	// second after (the issuer's releaseAfter). Idle is after that.
	time.Sleep(2 * time.Second)
	idle := rss(t, pid)
	t.Logf("idle: %.1f MiB", float64(idle)/mib)

	// 10 users sign up and sign in at once, then get a JWT each.
	const users = 10
	jwts := make([]string, users)
	var wg sync.WaitGroup
	for i := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			email := fmt.Sprintf("user%d@example.com", i)
			signUp(t, p.instance, email, "correct-horse-battery")
			res, body := p.do(t, "POST", "/api/auth/sign-in/email", fmt.Sprintf(`{"email":%q,"password":"correct-horse-battery"}`, email))
			if res.StatusCode != 200 || len(res.Cookies()) != 1 {
				t.Errorf("sign-in %s: got %d %s", email, res.StatusCode, body)
				return
			}
			jwts[i] = getJWT(t, p.instance, res.Cookies()[0].Name+"="+res.Cookies()[0].Value)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	afterBurst := hwm(t, pid)
	back := waitRSS(t, pid, idle+slack*mib, 5*time.Second)
	t.Logf("20 hashes (10 sign-ups, 10 sign-ins): peak %.1f MiB; %.1f MiB %v after the last one",
		float64(afterBurst)/mib, float64(rss(t, pid))/mib, back.Round(10*time.Millisecond))
	if afterBurst > idle+(concurrency*hashMiB+slack)*mib {
		t.Errorf("peak RSS during the sign-ins: %.1f MiB, want at most idle %.1f + %d x %d + %d MiB",
			float64(afterBurst)/mib, float64(idle)/mib, concurrency, hashMiB, slack)
	}
	if back < 0 {
		t.Fatalf("RSS %.1f MiB 5s after the last hash, want within %d MiB of idle (%.1f MiB)\n%s",
			float64(rss(t, pid))/mib, slack, float64(idle)/mib, memStats(t, p.metrics))
	}

	// 500 concurrent sign-ins: at most password_hash_concurrency hashes
	// run, the rest wait; the hashes' memory stays bounded by the formula.
	before := rss(t, pid)
	if before > idle+slack*mib {
		t.Fatalf("RSS %.1f MiB before the burst, want it back near idle %.1f MiB", float64(before)/mib, float64(idle)/mib)
	}
	stopBurst := make(chan struct{})
	peak := watchRSS(pid, stopBurst)
	const burst = 500
	var signedIn, busy atomic.Int64
	var statusMu sync.Mutex
	statuses := map[string]int{}
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := http.Post(p.base+"/api/auth/sign-in/email", "application/json",
				strings.NewReader(fmt.Sprintf(`{"email":"user%d@example.com","password":"correct-horse-battery"}`, i%users)))
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
	t.Logf("%d concurrent sign-ins: %d ok, %d busy (503); RSS before %.1f MiB, peak %.1f MiB (bound: idle %.1f + %d x %d MiB + %d x %d KiB + %d MiB)",
		burst, signedIn.Load(), busy.Load(), float64(before)/mib, float64(burstPeak)/mib, float64(idle)/mib, concurrency, hashMiB, burst, connKiB, slack)
	if signedIn.Load()+busy.Load() != burst || signedIn.Load() == 0 {
		t.Errorf("%d of %d sign-ins succeeded, %d busy; the others: %v", signedIn.Load(), burst, busy.Load(), statuses)
	}
	if burstPeak > idle+(concurrency*hashMiB+slack)*mib+burst*connKiB<<10 {
		t.Errorf("peak RSS during %d sign-ins: %.1f MiB, want at most idle %.1f + %d x %d MiB + %d x %d KiB + %d MiB",
			burst, float64(burstPeak)/mib, float64(idle)/mib, concurrency, hashMiB, burst, connKiB, slack)
	}
	if back := waitRSS(t, pid, idle+slack*mib, 5*time.Second); back < 0 {
		t.Errorf("RSS %.1f MiB 5s after the burst, want within %d MiB of idle (%.1f MiB)\n%s",
			float64(rss(t, pid))/mib, slack, float64(idle)/mib, memStats(t, p.metrics))
	} else {
		t.Logf("back within %d MiB of idle %v after the burst", slack, back.Round(10*time.Millisecond))
	}

	// 1,000 keep-alive clients on the business route for a few seconds.
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	peak = watchRSS(pid, stop)
	duration := 10 * time.Second
	end := time.Now().Add(duration)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", p.base+"/api/tasks", nil)
			req.Header.Set("Authorization", "Bearer "+jwts[i%users])
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
		}()
	}
	wg.Wait()
	close(stop)
	peakLoad := <-peak
	t.Logf("after the load, connections open:\n%s", memStats(t, p.metrics))
	t.Logf("%d connections for %v: %d requests, %d failed; peak RSS %.1f MiB; high-water mark since start %.1f MiB",
		conns, duration, ok.Load(), failed.Load(), float64(peakLoad)/mib, float64(hwm(t, pid))/mib)
	if failed.Load() != 0 {
		t.Errorf("%d business requests failed (first: %v), want none", failed.Load(), firstErr.Load())
	}
	if hw := hwm(t, pid); hw >= budget*mib {
		t.Errorf("RSS high-water mark %.1f MiB, want under %d MiB", float64(hw)/mib, budget)
	}
	tr.CloseIdleConnections()
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
