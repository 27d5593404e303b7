package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
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
			Database: db, Scenarios: keys, Smoke: o.Smoke},
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
		if s.Key == string(scenBusiness) && s.Ratio != nil {
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
	if c := r.scenario(scenNewToken); c != nil && c.FloorRatio != nil && c.Ratio != nil && c.FloorOverBare != nil {
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

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// write prints the table to out, and the JSON to path ("-": to out,
// instead of the table).
func (r *report) write(path string, out io.Writer) error {
	if path != "-" {
		if _, err := io.WriteString(out, r.markdown()); err != nil {
			return err
		}
	}
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = out.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func (r *report) markdown() string {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "authsidecar-bench, %s\n\n", r.Date)
	fmt.Fprintf(&b, "Machine: %s, %d CPUs, %d MiB, %s, Linux %s, %s\n", m.CPU, m.NumCPU, m.MemMiB, m.Go, m.Kernel, m.OSArch)
	st := r.Settings
	var lengths []string
	for _, s := range r.Scenarios {
		if s.Skipped != "" || s.Effect != nil {
			continue
		}
		l := fmt.Sprintf("%s %v", s.Key, time.Duration(s.Seconds*float64(time.Second)).Round(time.Millisecond))
		if s.Connections != st.Connections {
			l += fmt.Sprintf(" (%d connections)", s.Connections)
		}
		lengths = append(lengths, l)
	}
	fmt.Fprintf(&b, "Settings: %d keep-alive connections; %d interleaved run(s) per target (bare, sidecar, bare, ...), medians shown, sidecar/bare is the median of each pair's ratio; per run: %s; %d users, %d JWTs; %s; sidecar with production defaults (JSON access log at info, metrics on), rate limits off, a fresh sidecar process per scenario",
		st.Connections, st.Runs, strings.Join(lengths, ", "), st.Users, st.Tokens, st.Database)
	if slices.ContainsFunc(r.Scenarios, func(s scenarioReport) bool { return s.Floor != nil }) {
		b.WriteString("; c also against the floor, the bare proxy plus one crypto/ed25519.Verify of the Bearer token's signature per request (no other check, no cache), interleaved bare, floor, sidecar, bare, ..., sidecar/floor the median of each round's ratio")
	}
	if st.Postgres != "" {
		b.WriteString("; e-pg, f-pg: " + st.Postgres)
	}
	if st.Smoke {
		b.WriteString("; SMOKE RUN (numbers are not meaningful)")
	}
	b.WriteString("\n\n")
	b.WriteString("| scenario | target | req/s | p50 | p90 | p99 | errors | CPU µs/req | steady RSS | peak RSS |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	row := func(label, tgt string, s summary) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d | %.1f | %.1f MiB | %.1f MiB |\n", label, tgt,
			fmtRate(s.RPS), fmtLatency(s.P50us), fmtLatency(s.P90us), fmtLatency(s.P99us), s.Errors, s.CPUusPerReq, s.RSSMiB, s.PeakMiB)
	}
	for _, s := range r.Scenarios {
		if s.Skipped != "" {
			continue
		}
		if e := s.Effect; e != nil {
			// No load: p50 is the median time to the 401, p99 the
			// slowest of the trials.
			fmt.Fprintf(&b, "| %s | sidecar | - | %s | - | %s | 0 | - | - | - |\n", s.Label, fmtLatency(1000*e.SelfMedian), fmtLatency(1000*e.SelfMax))
			fmt.Fprintf(&b, "| | verifier | - | %s | - | %s | 0 | - | - | - |\n", fmtLatency(1000*e.OtherMedian), fmtLatency(1000*e.OtherMax))
			continue
		}
		if s.Bare == nil {
			row(s.Label, "sidecar", s.Sidecar)
			continue
		}
		row(s.Label, "bare", *s.Bare)
		if s.Floor != nil {
			row("", "floor", *s.Floor)
		}
		row("", "sidecar", s.Sidecar)
		ratioRow := func(name string, x *ratios) {
			fmt.Fprintf(&b, "| | **%s** | **%s** | %s | %s | **%s** | | %s | %s | %s |\n", name,
				fmtRatio(x.RPS), fmtRatio(x.P50), fmtRatio(x.P90), fmtRatio(x.P99), fmtRatio(x.CPU), fmtRatio(x.RSS), fmtRatio(x.PeakRSS))
		}
		ratioRow("sidecar/bare", s.Ratio)
		if s.FloorRatio != nil {
			ratioRow("sidecar/floor", s.FloorRatio)
		}
	}
	b.WriteString("\n")
	var notes []string
	for _, s := range r.Scenarios {
		if s.Skipped != "" {
			notes = append(notes, fmt.Sprintf("%s skipped: %s", s.Key, s.Skipped))
		}
		notes = append(notes, s.Notes...)
		for _, e := range []struct {
			tgt string
			s   *summary
		}{{"bare", s.Bare}, {"floor", s.Floor}, {"sidecar", &s.Sidecar}} {
			if e.s == nil || e.s.Errors == 0 {
				continue
			}
			kinds := make([]string, 0, len(e.s.ErrorsBy))
			for k, v := range e.s.ErrorsBy {
				kinds = append(kinds, fmt.Sprintf("%s %d", k, v))
			}
			sort.Strings(kinds)
			notes = append(notes, fmt.Sprintf("%s on %s: errors %s; first: %s", s.Key, e.tgt, strings.Join(kinds, ", "), e.s.FirstError))
		}
	}
	var gen []string
	for _, s := range r.Scenarios {
		if s.Bare != nil {
			gen = append(gen, fmt.Sprintf("%s %.1f", s.Key, s.Bare.GenCPUus))
		}
	}
	if len(gen) > 0 {
		notes = append(notes, "load generator CPU µs per request against the bare proxy (it shares the CPUs): "+strings.Join(gen, ", "))
	}
	notes = append(notes, r.Notes...)
	notes = append(notes, fmt.Sprintf("whole run, setup included: %.0fs", r.TotalSeconds))
	for _, n := range notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	return b.String()
}

func fmtRate(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// fmtLatency prints microseconds with three significant digits.
func fmtLatency(usec float64) string {
	switch {
	case usec >= 1e6:
		return fmt.Sprintf("%.3gs", usec/1e6)
	case usec >= 1e3:
		return fmt.Sprintf("%.3gms", usec/1e3)
	default:
		return fmt.Sprintf("%.3gµs", usec)
	}
}

func fmtRatio(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return fmt.Sprintf("%.2fx", v)
}
