package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// runStats is one run on one target.
type runStats struct {
	Target      string            `json:"target"`
	Run         int               `json:"run"`
	Seconds     float64           `json:"seconds"`  // first request to last response
	Requests    uint64            `json:"requests"` // successful
	Errors      map[string]uint64 `json:"errors"`   // by request kind
	RPS         float64           `json:"rps"`
	P50us       float64           `json:"p50_us"`
	P90us       float64           `json:"p90_us"`
	P99us       float64           `json:"p99_us"`
	CPUusPerReq float64           `json:"cpu_us_per_req"`           // the target process
	GenCPUus    float64           `json:"generator_cpu_us_per_req"` // the load generator
	// DBCPUusPerReq is the PostgreSQL server's CPU (all its processes)
	// per request, in the PostgreSQL scenarios when the benchmark started
	// the server (scenarioReport.DBCPU); 0 otherwise (on SQLite it is in
	// CPUusPerReq).
	DBCPUusPerReq float64 `json:"db_cpu_us_per_req,omitempty"`
	RSSMiB        float64 `json:"steady_rss_mib"` // VmRSS at the end
	PeakMiB       float64 `json:"peak_rss_mib"`   // VmHWM over the run
	FirstError    string  `json:"first_error,omitempty"`
	// OtherCPUPct is the share of all CPUs used by processes outside the
	// benchmark during the run; StealPct, the share the hypervisor took.
	// Either above a few percent makes the run noisy.
	OtherCPUPct float64 `json:"other_cpu_pct"`
	StealPct    float64 `json:"steal_pct"`
	// LoadStartMiB is VmRSS when the load started, right after the
	// sign-in burst, and BurstPeakMiB VmHWM from the process's start to
	// then (memory scenarios only).
	LoadStartMiB float64 `json:"load_start_rss_mib,omitempty"`
	BurstPeakMiB float64 `json:"burst_peak_rss_mib,omitempty"`
}

func (r runStats) errorCount() (n uint64) {
	for _, v := range r.Errors {
		n += v
	}
	return n
}

// summary is one target's runs of a scenario: medians, and the errors of
// all runs added up (a median would hide them).
type summary struct {
	Runs          int               `json:"runs"`
	RPS           float64           `json:"rps"`
	P50us         float64           `json:"p50_us"`
	P90us         float64           `json:"p90_us"`
	P99us         float64           `json:"p99_us"`
	Errors        uint64            `json:"errors"`
	ErrorsBy      map[string]uint64 `json:"errors_by_kind"`
	CPUusPerReq   float64           `json:"cpu_us_per_req"`
	GenCPUus      float64           `json:"generator_cpu_us_per_req"`
	DBCPUusPerReq float64           `json:"db_cpu_us_per_req,omitempty"`
	RSSMiB        float64           `json:"steady_rss_mib"`
	PeakMiB       float64           `json:"peak_rss_mib"`
	FirstError    string            `json:"first_error,omitempty"`
}

// ratios are sidecar/bare (or sidecar/floor, floor/bare): the median over
// the rounds of each sidecar run against the baseline's run of the same
// round, a moment before it.
type ratios struct {
	RPS     float64 `json:"rps"`
	P50     float64 `json:"p50"`
	P90     float64 `json:"p90"`
	P99     float64 `json:"p99"`
	CPU     float64 `json:"cpu_per_req"`
	RSS     float64 `json:"steady_rss"`
	PeakRSS float64 `json:"peak_rss"`
}

type scenarioReport struct {
	Key         string   `json:"key"`
	Label       string   `json:"label"`
	Baseline    bool     `json:"baseline"` // false: absolute numbers, no bare run
	Seconds     float64  `json:"seconds_per_run"`
	Connections int      `json:"connections"`
	PoolSize    int      `json:"token_pool,omitempty"`
	Bare        *summary `json:"bare,omitempty"`
	// Floor is the bare proxy plus one ed25519.Verify per request (c
	// only): the least any JWT verifier pays for a token it has not seen.
	Floor         *summary   `json:"floor,omitempty"`
	Sidecar       summary    `json:"sidecar"`
	Ratio         *ratios    `json:"ratio,omitempty"`            // sidecar/bare
	FloorRatio    *ratios    `json:"ratio_floor,omitempty"`      // sidecar/floor
	FloorOverBare *ratios    `json:"ratio_floor_bare,omitempty"` // floor/bare: what the verification alone costs
	Runs          []runStats `json:"runs"`
	Notes         []string   `json:"notes,omitempty"`
	// DBCPU: the runs measured the PostgreSQL server's CPU (the
	// benchmark started it).
	DBCPU bool `json:"db_cpu_measured,omitempty"`
	// Skipped says why the scenario did not run (no PostgreSQL); it then
	// has no numbers and no row.
	Skipped string `json:"skipped,omitempty"`
	// Effect is r's measurement (it has no load and no row of numbers).
	Effect *effectReport `json:"time_to_effect,omitempty"`
}

func summarize(runs []runStats) summary {
	s := summary{Runs: len(runs), ErrorsBy: map[string]uint64{}}
	col := func(f func(runStats) float64) float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	s.RPS = col(func(r runStats) float64 { return r.RPS })
	s.P50us = col(func(r runStats) float64 { return r.P50us })
	s.P90us = col(func(r runStats) float64 { return r.P90us })
	s.P99us = col(func(r runStats) float64 { return r.P99us })
	s.CPUusPerReq = col(func(r runStats) float64 { return r.CPUusPerReq })
	s.GenCPUus = col(func(r runStats) float64 { return r.GenCPUus })
	s.DBCPUusPerReq = col(func(r runStats) float64 { return r.DBCPUusPerReq })
	s.RSSMiB = col(func(r runStats) float64 { return r.RSSMiB })
	s.PeakMiB = col(func(r runStats) float64 { return r.PeakMiB })
	for _, r := range runs {
		for k, v := range r.Errors {
			s.ErrorsBy[k] += v
			s.Errors += v
		}
		if s.FirstError == "" {
			s.FirstError = r.FirstError
		}
	}
	return s
}

// ratio is a/b, or 0 when b is 0 (undefined; shown as "–").
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func (sr *scenarioReport) summarize() {
	var bare, floor, sc []runStats
	for _, r := range sr.Runs {
		switch r.Target {
		case "bare":
			bare = append(bare, r)
		case "floor":
			floor = append(floor, r)
		default:
			sc = append(sc, r)
		}
	}
	sr.Sidecar = summarize(sc)
	sr.Bare, sr.Ratio = against(sc, bare)
	sr.Floor, sr.FloorRatio = against(sc, floor)
	if len(floor) > 0 {
		_, sr.FloorOverBare = against(floor, bare)
	}
}

// against summarizes base, a baseline's runs, and returns the ratios of
// runs to it; nil, nil when base has no runs.
func against(runs, base []runStats) (*summary, *ratios) {
	if len(base) == 0 {
		return nil, nil
	}
	b, s := summarize(base), summarize(runs)
	if len(base) != len(runs) { // a run failed part-way: no pairs, ratio of medians
		return &b, &ratios{
			RPS: ratio(s.RPS, b.RPS), P50: ratio(s.P50us, b.P50us), P90: ratio(s.P90us, b.P90us), P99: ratio(s.P99us, b.P99us),
			CPU: ratio(s.CPUusPerReq, b.CPUusPerReq), RSS: ratio(s.RSSMiB, b.RSSMiB), PeakRSS: ratio(s.PeakMiB, b.PeakMiB),
		}
	}
	// Each run is compared with the baseline's run of the same round, a
	// moment before it, and the median of those ratios is reported: this
	// VM's speed drifts by 10-20% within a minute, which a ratio of two
	// medians taken over the whole scenario carries straight into the
	// result, and a pair does not.
	paired := func(f func(runStats) float64) float64 {
		xs := make([]float64, len(runs))
		for i := range runs {
			xs[i] = ratio(f(runs[i]), f(base[i]))
		}
		return median(xs)
	}
	return &b, &ratios{
		RPS:     paired(func(r runStats) float64 { return r.RPS }),
		P50:     paired(func(r runStats) float64 { return r.P50us }),
		P90:     paired(func(r runStats) float64 { return r.P90us }),
		P99:     paired(func(r runStats) float64 { return r.P99us }),
		CPU:     paired(func(r runStats) float64 { return r.CPUusPerReq }),
		RSS:     paired(func(r runStats) float64 { return r.RSSMiB }),
		PeakRSS: paired(func(r runStats) float64 { return r.PeakMiB }),
	}
}

type settings struct {
	Connections int      `json:"connections"`
	Runs        int      `json:"runs"`
	Duration    string   `json:"duration"`
	Users       int      `json:"users"`
	Tokens      int      `json:"tokens"`
	Database    string   `json:"database"`
	Postgres    string   `json:"postgres,omitempty"` // the server of e-pg and f-pg
	Scenarios   []string `json:"scenarios"`
	Smoke       bool     `json:"smoke"`
	AA          bool     `json:"aa,omitempty"` // a second bare proxy stood in for the sidecar
}

type report struct {
	Date         string           `json:"date"`
	Machine      machine          `json:"machine"`
	Settings     settings         `json:"settings"`
	Scenarios    []scenarioReport `json:"scenarios"`
	Notes        []string         `json:"notes,omitempty"`
	TotalSeconds float64          `json:"total_seconds"`
}

func newReport(o benchOptions) *report {
	db := "fresh temporary database"
	if o.DB != "" {
		db = o.DB
	}
	keys := make([]string, len(o.Scenarios))
	for i, k := range o.Scenarios {
		keys[i] = string(k)
	}
	return &report{
		Date:    time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Machine: describeMachine(),
		Settings: settings{Connections: o.Connections, Runs: o.Runs, Duration: o.Duration.String(), Users: o.Users, Tokens: o.Tokens,
			Database: db, Scenarios: keys, Smoke: o.Smoke, AA: o.AA},
	}
}

// scenario returns the report of scenario k, nil if it did not run.
func (r *report) scenario(k scenarioKey) *scenarioReport {
	for i := range r.Scenarios {
		if s := &r.Scenarios[i]; s.Key == string(k) && s.Skipped == "" {
			return s
		}
	}
	return nil
}

// finish adds the notes that compare with issue 6's goals, verifier mode
// with full mode, and PostgreSQL with SQLite.
func (r *report) finish(total time.Duration) {
	r.TotalSeconds = math.Round(total.Seconds()*10) / 10
	var maxRSS float64
	for _, s := range r.Scenarios {
		if s.Key == string(scenBusiness) && s.Ratio != nil && !r.Settings.AA {
			r.Notes = append(r.Notes, fmt.Sprintf("goal for a (issue 24): req/s ratio %.2f (want >= 1.00: %s), p99 ratio %.2f (want <= 1.10: %s)",
				s.Ratio.RPS, met(s.Ratio.RPS >= 1), s.Ratio.P99, met(s.Ratio.P99 <= 1.1)))
		}
		if d := scenarioByKey(scenarioKey(s.Key)); d.memory && s.Ratio != nil && s.Skipped == "" {
			n := fmt.Sprintf("goal for %s (issue 24): sidecar peak RSS %.1f MiB (want < 128: %s), %.2fx the bare proxy's (want <= 2.00: %s), errors %d (want 0: %s)",
				s.Key, s.Sidecar.PeakMiB, met(s.Sidecar.PeakMiB < 128), s.Ratio.PeakRSS, met(s.Ratio.PeakRSS <= 2), s.Sidecar.Errors, met(s.Sidecar.Errors == 0))
			r.Notes = append(r.Notes, n)
		}
		if d := scenarioByKey(scenarioKey(s.Key)); !d.memory && s.Key != string(scenSignIn) && s.Key != string(scenMix) && s.Key != string(scenSignInPG) {
			maxRSS = math.Max(maxRSS, s.Sidecar.RSSMiB)
		}
	}
	if r.Settings.AA {
		r.Notes = append(r.Notes, "A/A calibration (-aa): a second bare proxy stood in for the sidecar, so the goals of a and c are not evaluated; each sidecar/bare ratio away from 1.00x is the method's bias or noise")
	}
	if c := r.scenario(scenNewToken); c != nil && c.FloorRatio != nil && c.Ratio != nil && c.FloorOverBare != nil && !r.Settings.AA {
		r.Notes = append(r.Notes, fmt.Sprintf("goal for c (issue 14, a new token every request): req/s ratio to the floor %.2f (want >= 0.90: %s), to bare %.2f; p99 ratio to the floor %.2f, to bare %.2f; the floor itself: req/s %.2f of bare, CPU µs/req %.2fx",
			c.FloorRatio.RPS, met(c.FloorRatio.RPS >= 0.9), c.Ratio.RPS, c.FloorRatio.P99, c.Ratio.P99, c.FloorOverBare.RPS, c.FloorOverBare.CPU))
	}
	if v := r.scenario(scenVerifier); v != nil && v.Ratio != nil {
		n := fmt.Sprintf("a-verifier (verifier mode, the same hot path as a): req/s ratio %.2f, p99 ratio %.2f, CPU µs/req ratio %.2f, steady RSS %.1f MiB",
			v.Ratio.RPS, v.Ratio.P99, v.Ratio.CPU, v.Sidecar.RSSMiB)
		if a := r.scenario(scenBusiness); a != nil && a.Ratio != nil {
			n += fmt.Sprintf("; a (full mode) in this run: %.2f, %.2f, %.2f, %.1f MiB", a.Ratio.RPS, a.Ratio.P99, a.Ratio.CPU, a.Sidecar.RSSMiB)
		}
		r.Notes = append(r.Notes, n)
	}
	if rv := r.scenario(scenRevocations); rv != nil && rv.Ratio != nil {
		n := fmt.Sprintf("a-rev1m (a's hot path with the revocations held): req/s ratio %.2f, p99 ratio %.2f, CPU µs/req ratio %.2f, steady RSS %.1f MiB",
			rv.Ratio.RPS, rv.Ratio.P99, rv.Ratio.CPU, rv.Sidecar.RSSMiB)
		if a := r.scenario(scenBusiness); a != nil && a.Ratio != nil {
			n += fmt.Sprintf("; a (none held) in this run: %.2f, %.2f, %.2f, %.1f MiB: req/s with them held %.3f of without (two scenarios' ratios: within a few %% is noise)",
				a.Ratio.RPS, a.Ratio.P99, a.Ratio.CPU, a.Sidecar.RSSMiB, ratio(rv.Ratio.RPS, a.Ratio.RPS))
		}
		r.Notes = append(r.Notes, n)
	}
	if e := r.scenario(scenEffect); e != nil && e.Effect != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("r: a sign-out's JWT refused after median %.1f ms (max %.1f) on the sidecar that wrote it, median %.0f ms (max %.0f) on a verifier reading its feed, over %d trials (bound: 2000 ms: %s)",
			e.Effect.SelfMedian, e.Effect.SelfMax, e.Effect.OtherMedian, e.Effect.OtherMax, e.Effect.Trials, met(e.Effect.OtherMax <= 2000)))
	}
	for _, c := range []struct{ pg, sqlite scenarioKey }{{scenSessionPG, scenSession}, {scenSignInPG, scenSignIn}} {
		p := r.scenario(c.pg)
		if p == nil {
			continue
		}
		n := fmt.Sprintf("%s: %s req/s on PostgreSQL", p.Key, fmtRate(p.Sidecar.RPS))
		if q := r.scenario(c.sqlite); q != nil {
			n += fmt.Sprintf(" (%.2f of %s, %s req/s on SQLite; two scenarios' medians, not interleaved pairs: differences within ~15%% are noise)",
				ratio(p.Sidecar.RPS, q.Sidecar.RPS), q.Key, fmtRate(q.Sidecar.RPS))
		}
		n += fmt.Sprintf("; CPU µs/req: the sidecar %.1f", p.Sidecar.CPUusPerReq)
		if p.DBCPU {
			n += fmt.Sprintf(" + PostgreSQL's processes %.1f", p.Sidecar.DBCPUusPerReq)
		} else {
			n += " + PostgreSQL's (not measured: a server the benchmark did not start)"
		}
		if q := r.scenario(c.sqlite); q != nil {
			n += fmt.Sprintf(", against %.1f on SQLite (in the sidecar)", q.Sidecar.CPUusPerReq)
		}
		r.Notes = append(r.Notes, n)
	}
	var others, steals []float64
	var noisy []string
	for _, s := range r.Scenarios {
		for _, run := range s.Runs {
			others, steals = append(others, run.OtherCPUPct), append(steals, run.StealPct)
			if run.OtherCPUPct+run.StealPct > 5 {
				noisy = append(noisy, fmt.Sprintf("%s run %d %s %.0f%%", s.Key, run.Run, run.Target, run.OtherCPUPct+run.StealPct))
			}
		}
	}
	if len(others) > 0 {
		n := fmt.Sprintf("machine noise, as a share of all CPUs during a run: used by processes outside the benchmark (other containers on this kernel) median %.1f%%, highest %.1f%%; stolen by the hypervisor median %.1f%%, highest %.1f%%",
			median(others), slices.Max(others), median(steals), slices.Max(steals))
		if len(noisy) > 0 {
			n += "; runs above 5% (less trustworthy): " + strings.Join(noisy, ", ")
		}
		r.Notes = append(r.Notes, n)
	}
	if maxRSS > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("sidecar steady RSS, highest median outside sign-in bursts (all but b, f, f-pg, g, g-64): %.1f MiB (want < 64: %s)", maxRSS, met(maxRSS < 64)))
	}
}
