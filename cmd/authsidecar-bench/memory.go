package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The memory scenarios (issue 24): keep-alive business load on a sidecar
// that has just hashed passwords, against a bare proxy given the same
// requests. Each run starts both processes afresh, so a run's peak is that
// of a process meeting the load for the first time, not the leftovers of
// the previous run (RSS a runtime has not returned would raise the next
// run's peak).

const (
	// burstUsers each sign up, then sign in: 2 x burstUsers scrypt hashes
	// (the bare proxy forwards the same requests to the upstream).
	burstUsers = 10
	// memoryRuns caps -runs for these scenarios: each run starts two
	// processes and hashes 20 passwords, and peak RSS varies less between
	// runs than a rate does.
	memoryRuns = 7
)

// burstStats is the state the burst left: RSS when the load starts, and
// the peak from the process's start until then.
type burstStats struct{ startMiB, peakMiB float64 }

// signInBurst sends burstUsers concurrent sign-ups, each followed by a
// sign-in of the same user, and returns once the last is answered. The
// sidecar must answer each with a session cookie, the bare proxy (whose
// upstream answers anything) with 200.
func (b *bench) signInBurst(ctx context.Context, t target) (burstStats, error) {
	b.burstSeq++
	seq := b.burstSeq
	client := newSetupClient()
	defer client.CloseIdleConnections()
	base := "http://" + t.addr
	call := postJSON
	if t.name == "sidecar" {
		call = authCall
	}
	var wg sync.WaitGroup
	errs := make([]error, burstUsers)
	for i := range burstUsers {
		wg.Go(func() {
			email := "burst" + strconv.Itoa(seq) + "-" + strconv.Itoa(i) + "@example.com"
			if _, err := call(ctx, client, base, "/api/auth/sign-up/email",
				map[string]string{"name": "Burst User", "email": email, "password": benchPassword}); err != nil {
				errs[i] = err
				return
			}
			_, errs[i] = call(ctx, client, base, "/api/auth/sign-in/email", map[string]string{"email": email, "password": benchPassword})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return burstStats{}, err
		}
	}
	rss, hwm, err := memKiB(t.pid)
	if err != nil {
		return burstStats{}, err
	}
	return burstStats{startMiB: float64(rss) / 1024, peakMiB: float64(hwm) / 1024}, nil
}

// runMemory runs a memory scenario: per round a fresh bare proxy, then a
// fresh sidecar, each given the burst and then the load.
func (b *bench) runMemory(ctx context.Context, d scenarioDef) (scenarioReport, error) {
	dur := time.Duration(float64(b.o.Duration) * d.weight)
	runs := min(b.o.Runs, memoryRuns)
	sr := scenarioReport{Key: string(d.key), Label: d.label, Baseline: true, Seconds: dur.Seconds(), Connections: b.conns(d)}
	shared := b.bare
	defer func() { b.bare, b.scPID = shared, 0 }()
	b.logf("scenario %s: %d run(s) of %v per target on %d connections, each on fresh processes after %d sign-ups and %d sign-ins",
		d.key, runs, dur, b.conns(d), burstUsers, burstUsers)
	var logs []string
	for run := range runs {
		for _, name := range []string{"bare", "sidecar"} {
			t, stop, log, err := b.freshTarget(ctx, d, name, run+1)
			if err != nil {
				return sr, err
			}
			rs, err := b.measure(ctx, d, b.fx, t, dur)
			stop()
			if err != nil {
				return sr, err
			}
			if log != "" && rs.errorCount() > 0 {
				logs = append(logs, log)
			}
			rs.Run = run + 1
			sr.Runs = append(sr.Runs, rs)
			b.logf("  %s run %d %-7s %8.0f req/s  p99 %-8s errors %d  RSS at load start %.1f MiB, peak %.1f MiB  (other load %.0f%%)",
				d.key, run+1, t.name, rs.RPS, fmtLatency(rs.P99us), rs.errorCount(), rs.LoadStartMiB, rs.PeakMiB, rs.OtherCPUPct+rs.StealPct)
		}
	}
	sr.summarize()
	for _, tgt := range []string{"bare", "sidecar"} {
		var start, burst, peak []float64
		for _, r := range sr.Runs {
			if r.Target == tgt {
				start, burst, peak = append(start, r.LoadStartMiB), append(burst, r.BurstPeakMiB), append(peak, r.PeakMiB)
			}
		}
		sr.Notes = append(sr.Notes, fmt.Sprintf("%s, %s: RSS when the load started %.1f MiB (median), peak before it (start-up and the sign-ins) %.1f MiB, peak under load %.1f MiB (runs ranged %.1f-%.1f)",
			d.key, tgt, median(start), median(burst), median(peak), slices.Min(peak), slices.Max(peak)))
	}
	if len(logs) > 0 {
		sr.Notes = append(sr.Notes, fmt.Sprintf("%s: the sidecar's log says: %s", d.key, firstLogError(logs[0])))
	}
	return sr, nil
}

// freshTarget starts a new bare proxy or sidecar for one run of d and
// makes it the one measure accounts for; stop ends it. log is a
// sidecar's log file.
func (b *bench) freshTarget(ctx context.Context, d scenarioDef, name string, run int) (t target, stop func(), log string, err error) {
	tag := fmt.Sprintf("%s-%s-%d", d.key, name, run)
	if name == "bare" {
		if t, err = b.startBare(ctx, tag); err != nil {
			return t, nil, "", err
		}
		b.bare = t
		return t, t.proc.stop, "", nil
	}
	// 1,000 connections from 127.0.0.1 are 1,000 clients here.
	proc, err := b.startSidecar(ctx, sidecarConfig{name: tag, access: true, oneAddress: true})
	if err != nil {
		return t, nil, "", err
	}
	b.scPID = proc.pid()
	return target{name: "sidecar", addr: proc.addr, pid: proc.pid()}, proc.stop, proc.log, nil
}
