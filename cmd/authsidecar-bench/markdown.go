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
	if st.AA {
		b.WriteString("; A/A CALIBRATION: the rows named sidecar that have a bare baseline measure a second bare proxy, so their ratios are the method's bias, not the sidecar's cost")
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
