package sqlstore_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// The scale of TestSweepUnderLoad. Without -sweep.rows, sweepScale's:
// what CI runs (under -race) in about a minute per store. The million of
// docs/benchmarks.md is
//
//	go test -run TestSweepUnderLoad -v ./sqlstore -args -sweep.rows=1000000
var (
	sweepRows  = flag.Int("sweep.rows", 0, "TestSweepUnderLoad: expired sessions to sweep; 0: a scale per engine for CI")
	sweepRound = flag.Duration("sweep.round", 500*time.Millisecond, "TestSweepUnderLoad: length of one round with or without the sweeper")
)

// sweepScale is the backlog TestSweepUnderLoad sweeps on engine: enough
// for seconds of sweeping, so both sides of the comparison get samples.
// SQLite under -race runs as instrumented Go, some 30 times slower (a
// batch of 1000 takes about half a second); PostgreSQL does its work in
// the server.
func sweepScale(engine string) int {
	switch {
	case *sweepRows > 0:
		return *sweepRows
	case engine == "sqlite" && raceEnabled:
		return 20000
	case engine == "sqlite":
		return 200000
	}
	return 500000
}

// TestSweepUnderLoad: a backlog of expired sessions (-sweep.rows, a
// million by hand) is swept on each store while sign-ins and get-sessions
// go on against the real issuer, and the p99 latency of each stays within
// twice its p99 without the sweeper in the same run. The load is paced
// (a steady rate, not as fast as the machine goes: a saturated machine
// measures its own queue), and rounds with and without the sweeper
// alternate until the backlog is gone, so a change in what else the
// machine runs falls on both sides alike.
//
// Under -race (CI) it runs the same, smaller, and checks everything but
// the ratios, which it logs: the detector slows SQLite's Go code some 30
// times, so a batch holds a CPU for 20 ms instead of 1 and the ratio
// measures the detector (as TestHotPathRevocationCost says in proxy);
// repeated runs on the loaded 2-CPU machine gave 0.5 to 2.6.
func TestSweepUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts and sweeps a backlog under load for tens of seconds")
	}
	for _, eng := range engines {
		t.Run(eng.name, func(t *testing.T) {
			db := eng.fresh(t).mustOpen(t)
			sweepUnderLoad(t, db, sweepScale(eng.name), *sweepRound)
		})
	}
}

// loadSample is one request's latency, and whether the sweeper was on
// when it began.
type loadSample struct {
	d     time.Duration
	sweep bool
}

func sweepUnderLoad(t *testing.T, db *sqlstore.DB, rows int, round time.Duration) {
	ctx := context.Background()
	const base = "http://localhost:8080"
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// A real hash, cheaper than the default (4 MiB, a few ms): the
	// store's part of a sign-in weighs more in it, not less.
	iss, err := issuer.New(ctx, issuer.Options{Store: db, Secret: []byte("sweep-load-secret-0123456789abcdefghijklmnop"), BaseURL: base,
		PasswordCost: issuer.ScryptParams{N: 1 << 12, R: 8, P: 1}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(iss)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	call := func(method, path, body, cookie string) (*http.Response, time.Duration) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", base)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return nil, 0
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		took := time.Since(start)
		if res.StatusCode != 200 {
			t.Errorf("%s %s: got %d, want 200", method, path, res.StatusCode)
		}
		return res, took
	}
	const users = 8
	var cookies []string
	for i := range users {
		res, _ := call("POST", "/api/auth/sign-up/email", fmt.Sprintf(`{"name":"U","email":"u%d@example.com","password":"correct-horse-battery"}`, i), "")
		if res == nil {
			t.FailNow()
		}
		c := res.Cookies()[0]
		cookies = append(cookies, c.Name+"="+c.Value)
	}

	// The backlog: sessions of one user that expired an hour ago.
	now := time.Now()
	mustCreateUser(t, db, "flood", "flood@example.com", now.Add(-48*time.Hour), now.Add(time.Hour))
	start := time.Now()
	if err := db.InsertSessionsForTest(ctx, "flood", "x", rows, now.Add(-time.Hour), now.Add(-48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d expired sessions inserted in %v", db.Engine(), rows, time.Since(start).Round(time.Millisecond))
	sw, err := sqlstore.NewSweeper(db, sqlstore.SweeperOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}

	// The load: get-session from 8 clients, 25 a second each; 40
	// sign-ins a second (a hash and two writes: the per-email bucket and
	// the session). Under -race a request costs ten times the CPU: a
	// quarter of the rate keeps the machine below its capacity.
	slow := time.Duration(1)
	if raceEnabled {
		slow = 4
	}
	var sweeping atomic.Bool
	var mu sync.Mutex
	samples := map[string][]loadSample{}
	record := func(kind string, d time.Duration, on bool) {
		mu.Lock()
		samples[kind] = append(samples[kind], loadSample{d, on})
		mu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Each client sends on its schedule whether or not its last request
	// has been answered (a request stuck behind the sweeper is counted
	// with all it waited, not hidden by the requests it held back), at a
	// random time around its mean: clients in step would meet every
	// stall together and count it several times over.
	paced := func(every time.Duration, do func(i int)) {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(every/2 + rand.N(every)):
				}
				wg.Go(func() { do(i) })
			}
		})
	}
	for c := range 8 {
		paced(slow*40*time.Millisecond, func(i int) {
			on := sweeping.Load()
			if _, d := call("GET", "/api/auth/get-session", "", cookies[(c+8*i)%users]); d > 0 {
				record("get-session", d, on)
			}
		})
	}
	paced(slow*25*time.Millisecond, func(i int) {
		on := sweeping.Load()
		if _, d := call("POST", "/api/auth/sign-in/email", fmt.Sprintf(`{"email":"u%d@example.com","password":"correct-horse-battery"}`, i%users), ""); d > 0 {
			record("sign-in", d, on)
		}
	})

	// One run, as the sidecar's, held between two batches every other
	// round: rounds off and on until the backlog is gone, as many of
	// each. A round off begins once the batch under way has ended.
	gate := newOnOff()
	sw.SetGateForTest(gate.wait)
	type result struct {
		res sqlstore.SweepResult
		err error
	}
	ran := make(chan result, 1)
	go func() {
		res, err := sw.Sweep(ctx)
		ran <- result{res, err}
	}()
	var on, off int
	var sweepTime time.Duration
	var res result
	for done := false; !done || off < on; {
		if !done {
			sweeping.Store(true)
			began := time.Now()
			gate.set(true)
			select {
			case res = <-ran:
				done = true
			case <-time.After(round):
			}
			gate.set(false)
			if !done {
				// The batch under way ends: the run is held, or it was the
				// last.
				select {
				case <-gate.heldNow():
				case res = <-ran:
					done = true
				}
			}
			sweeping.Store(false)
			sweepTime += time.Since(began)
			on++
		}
		time.Sleep(round)
		off++
		if on > 10000 {
			t.Fatalf("the backlog is not gone after %d rounds", on)
		}
	}
	close(stop)
	wg.Wait()
	removed := res.res.Removed[sqlstore.SweepSessions]
	if res.err != nil || removed != int64(rows) {
		t.Errorf("sweep: got %d expired sessions removed, %v, want %d", removed, res.err, rows)
	}
	// Left: each user's sign-up and sign-ins, and the flood user's own.
	wantCounts(t, db, map[string]int{"session": users + len(samples["sign-in"]) + 1})
	t.Logf("%s: %d expired sessions swept in %v of sweeping (%d rounds of up to %v on, %d off)", db.Engine(), removed, sweepTime.Round(time.Millisecond), on, round, off)

	for _, kind := range []string{"get-session", "sign-in"} {
		var with, without []time.Duration
		for _, s := range samples[kind] {
			if s.sweep {
				with = append(with, s.d)
			} else {
				without = append(without, s.d)
			}
		}
		if len(with) < 20 || len(without) < 20 {
			t.Errorf("%s: only %d samples with the sweeper and %d without, want 20 of each at least", kind, len(with), len(without))
			continue
		}
		pw, po := p99(with), p99(without)
		ratio := float64(pw) / float64(po)
		t.Logf("%s %s: p99 %v with the sweeper (%d requests), %v without (%d): ratio %.2f; p50 %v and %v",
			db.Engine(), kind, pw, len(with), po, len(without), ratio, p50(with), p50(without))
		if ratio > 2 && !raceEnabled {
			t.Errorf("%s: p99 %v while sweeping, %v without: ratio %.2f, want at most 2", kind, pw, po, ratio)
		}
	}
}

func p99(ds []time.Duration) time.Duration { return quantile(ds, 0.99) }

func p50(ds []time.Duration) time.Duration { return quantile(ds, 0.5) }

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// onOff holds a sweeper's run between two batches while off.
type onOff struct {
	mu     sync.Mutex
	on     bool
	wake   chan struct{} // closed when switched on
	held   chan struct{} // closed when the run waits, while off
	isHeld bool
}

func newOnOff() *onOff { return &onOff{wake: make(chan struct{}), held: make(chan struct{})} }

func (g *onOff) set(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.on = on
	if on {
		close(g.wake)
		g.wake, g.held, g.isHeld = make(chan struct{}), make(chan struct{}), false
	}
}

// wait is the sweeper's gate: it returns at once while on, and waits for
// on while off.
func (g *onOff) wait(ctx context.Context) error {
	g.mu.Lock()
	if g.on {
		g.mu.Unlock()
		return nil
	}
	wake := g.wake
	if !g.isHeld {
		g.isHeld = true
		close(g.held)
	}
	g.mu.Unlock()
	select {
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// heldNow is closed once the run is held, after set(false).
func (g *onOff) heldNow() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}
