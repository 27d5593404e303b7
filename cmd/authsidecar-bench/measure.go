package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"time"
)

// fillPool fetches scenario c's fresh JWTs: enough for every sidecar run
// at the rate scenario a reached (an upper bound: misses are slower), at
// most -pool-max and -pool-time. Without a, it assumes 10000 req/s, about
// twice what c's sidecar reached on 2 cores after issue 14 (5500; 5000,
// assumed before, left 2500 of 29700 tokens in "-scenarios c -runs 11").
func (b *bench) fillPool(ctx context.Context, dur time.Duration, sr *scenarioReport) error {
	rate := 10000.0
	for _, s := range b.report.Scenarios {
		if s.Key == string(scenBusiness) {
			rate = s.Sidecar.RPS
		}
	}
	want := int(math.Ceil(rate * dur.Seconds() * float64(b.o.Runs) * 1.2))
	want = min(max(want, 100), b.o.PoolMax)
	b.logf("scenario c: fetching up to %d fresh JWTs (get-session, at most %v)", want, b.o.PoolTime)
	proc, err := b.startSidecar(ctx, sidecarConfig{name: "pool", access: true})
	if err != nil {
		return err
	}
	defer proc.stop()
	t0 := time.Now()
	tokens, err := fetchJWTs(ctx, proc.addr, b.fx.cookies, want, b.o.PoolTime)
	if err != nil {
		return fmt.Errorf("fetching the token pool: %w", err)
	}
	if len(tokens) == 0 {
		return errors.New("fetching the token pool: no token within -pool-time")
	}
	secs := time.Since(t0).Seconds()
	b.logf("scenario c: %d JWTs in %.1fs (%.0f/s)", len(tokens), secs, float64(len(tokens))/secs)
	b.fx.pool = &tokenPool{tokens: tokens}
	sr.PoolSize = len(tokens)
	return nil
}

// measure is one run on one target, with its CPU and memory.
func (b *bench) measure(ctx context.Context, d scenarioDef, fx *fixtures, t target, dur time.Duration) (runStats, error) {
	select {
	case <-ctx.Done():
		return runStats{}, ctx.Err()
	case <-time.After(b.settle()):
	}
	var burst burstStats
	if d.memory {
		var err error
		if burst, err = b.signInBurst(ctx, t); err != nil {
			return runStats{}, fmt.Errorf("%s: sign-in burst: %w", t.name, err)
		}
	}
	if err := resetPeakRSS(t.pid); err != nil {
		b.peakNote = true
	}
	// The CPU window: the target's time, the generator's, and how much of
	// the machine went to processes that are not the benchmark's (other
	// containers on this kernel) or was stolen by the hypervisor.
	// A PostgreSQL scenario's database server is ours too, and its
	// processes' CPU is the database's share of a request (on SQLite, the
	// sidecar's own).
	pids := []int{os.Getpid(), b.upPID, b.bare.pid, b.scPID}
	for _, pid := range []int{b.floor.pid, b.auxPID} {
		if pid != 0 {
			pids = append(pids, pid)
		}
	}
	ours := func() (n uint64) {
		for _, pid := range pids {
			if v, err := cpuTicks(pid); err == nil {
				n += v
			}
		}
		return n
	}
	var cpu0, cpu1, self0, self1, ours0, ours1, proc0, proc1, total0, total1, steal0, steal1, db0, db1 uint64
	var cpuErr, dbErr error
	p := probe{
		start: func() {
			cpu0, cpuErr = cpuTicks(t.pid)
			self0, _ = cpuTicks(os.Getpid())
			if d.postgres {
				db0, dbErr = b.pg.dbTicks()
			}
			ours0 = ours() + db0
			proc0, total0, steal0, _ = machineTicks()
		},
		stop: func() {
			var err error
			cpu1, err = cpuTicks(t.pid)
			cpuErr = errors.Join(cpuErr, err)
			self1, _ = cpuTicks(os.Getpid())
			if d.postgres {
				db1, err = b.pg.dbTicks()
				dbErr = errors.Join(dbErr, err)
			}
			ours1 = ours() + db1
			proc1, total1, steal1, _ = machineTicks()
		},
	}
	spec := loadSpec{addr: t.addr, conns: b.conns(d), duration: dur, next: fx.generatorFor(d.stream(), t.addr, t.name == "sidecar"),
		tunnel: d.tunnel, wantJWT: t.name == "sidecar"}
	res, err := runLoad(ctx, spec, p)
	if err != nil {
		return runStats{}, fmt.Errorf("%s: %w", t.name, err)
	}
	if cpuErr != nil {
		return runStats{}, fmt.Errorf("%s: cpu time: %w", t.name, cpuErr)
	}
	rss, hwm, err := memKiB(t.pid)
	if err != nil {
		return runStats{}, fmt.Errorf("%s: memory: %w", t.name, err)
	}
	ok := res.totalOK()
	perReq := func(ticks uint64) float64 {
		if ok == 0 {
			return 0
		}
		return float64(ticks) * 1e6 / clockTicks / float64(ok)
	}
	rs := runStats{
		Target:      t.name,
		Seconds:     res.elapsed.Seconds(),
		Requests:    ok,
		Errors:      map[string]uint64{},
		RPS:         float64(ok) / res.elapsed.Seconds(),
		P50us:       us(res.hist.percentile(0.50)),
		P90us:       us(res.hist.percentile(0.90)),
		P99us:       us(res.hist.percentile(0.99)),
		CPUusPerReq: perReq(cpu1 - cpu0),
		GenCPUus:    perReq(self1 - self0),
		RSSMiB:      float64(rss) / 1024,
		PeakMiB:     float64(hwm) / 1024,
		FirstError:  res.firstErr,

		LoadStartMiB: burst.startMiB,
		BurstPeakMiB: burst.peakMiB,
	}
	if d.postgres && dbErr == nil && db1 >= db0 {
		rs.DBCPUusPerReq = perReq(db1 - db0)
	}
	if total := float64(total1 - total0); total > 0 {
		other := float64(proc1-proc0) - float64(ours1-ours0)
		rs.OtherCPUPct = max(0, 100*other/total)
		rs.StealPct = 100 * float64(steal1-steal0) / total
	}
	for k := range numKinds {
		if res.errs[k] > 0 {
			rs.Errors[kindNames[k]] = res.errs[k]
		}
	}
	return rs, nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
