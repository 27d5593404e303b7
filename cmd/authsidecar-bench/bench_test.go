package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary play the benchmark's hidden modes: the
// benchmark re-executes its own binary (here, this test binary) as the
// upstream, the bare proxy and the floor.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "upstream" || os.Args[1] == "bare" || os.Args[1] == "floor") {
		ctx, stop := signalContext()
		err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		if err != nil {
			os.Stderr.WriteString("authsidecar-bench: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSmoke builds the real sidecar and runs the whole benchmark in smoke
// mode (about 2 s of load): every scenario must produce a row, the sidecar
// must serve each one, and no request may fail. It checks no timing. The
// PostgreSQL scenarios may be skipped for want of PostgreSQL, except under
// CI=true, where that means a broken CI setup (it installs Debian's
// postgresql), as for internal/pgtest.
func TestSmoke(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command to build ./cmd/authsidecar")
	}
	if testing.Short() {
		t.Skip("builds and runs the benchmark")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	var stdout, stderr bytes.Buffer
	if err := run(ctx, []string{"-smoke", "-json", jsonPath}, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	table := stdout.String()
	t.Logf("table:\n%s", table)

	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("decoding the JSON report: %v", err)
	}
	if len(rep.Scenarios) != len(scenarioDefs) {
		t.Fatalf("got %d scenarios in the report, want %d", len(rep.Scenarios), len(scenarioDefs))
	}
	for i, d := range scenarioDefs {
		s := rep.Scenarios[i]
		if s.Key != string(d.key) {
			t.Errorf("scenario %d is %q, want %q", i, s.Key, d.key)
			continue
		}
		if s.Skipped != "" {
			switch {
			case !d.postgres:
				t.Errorf("%s skipped (%s), want it run: only PostgreSQL scenarios may be", d.key, s.Skipped)
			case os.Getenv("CI") == "true":
				t.Errorf("%s skipped under CI=true: %s", d.key, s.Skipped)
			default:
				t.Logf("%s skipped: %s", d.key, s.Skipped)
			}
			continue
		}
		if !strings.Contains(table, "| "+d.label+" |") {
			t.Errorf("table has no row for %s (%q)", d.key, d.label)
		}
		if d.effect {
			// No load: times, not rates.
			if e := s.Effect; e == nil || e.Trials != effectTrials || e.SelfMedian <= 0 || e.OtherMedian <= 0 || e.OtherMax > 10000 {
				t.Errorf("%s: time to effect %+v, want %d trials with times", d.key, e, effectTrials)
			}
			continue
		}
		if s.Sidecar.RPS <= 0 {
			t.Errorf("%s: sidecar req/s = %v, want > 0", d.key, s.Sidecar.RPS)
		}
		if d.bare != (s.Bare != nil) {
			t.Errorf("%s: bare baseline present = %t, want %t", d.key, s.Bare != nil, d.bare)
		}
		// The floor answers 401 to a token it cannot verify: no errors
		// below means it verified every one.
		if d.floor != (s.Floor != nil) || d.floor != (s.FloorRatio != nil) {
			t.Errorf("%s: floor present = %t, sidecar/floor = %t, want %t", d.key, s.Floor != nil, s.FloorRatio != nil, d.floor)
		}
		if s.Floor != nil && s.Floor.RPS <= 0 {
			t.Errorf("%s: floor req/s = %v, want > 0", d.key, s.Floor.RPS)
		}
		for _, sum := range []*summary{s.Bare, s.Floor, &s.Sidecar} {
			if sum == nil {
				continue
			}
			if n := sum.ErrorsBy[kindNames[kindBusiness]]; n != 0 {
				t.Errorf("%s: %d business requests failed, want 0; first error: %s", d.key, n, sum.FirstError)
			}
			if sum.Errors != 0 {
				t.Errorf("%s: %d requests failed (%v), want 0; first error: %s", d.key, sum.Errors, sum.ErrorsBy, sum.FirstError)
			}
		}
	}
	for _, want := range []string{"Machine: ", "| scenario | target | req/s |", "sidecar/bare", "|  | floor |", "sidecar/floor", "goal for c (issue 14"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

func TestParseBenchFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr bool
		check   func(benchOptions) bool
	}{
		{nil, false, func(o benchOptions) bool {
			return o.Runs == 21 && o.Duration == 600*time.Millisecond && len(o.Scenarios) == len(scenarioDefs)
		}},
		{[]string{"-smoke"}, false, func(o benchOptions) bool { return o.Runs == 1 && o.Duration == 150*time.Millisecond }},
		{[]string{"-smoke", "-runs", "2"}, false, func(o benchOptions) bool { return o.Runs == 2 }},
		{[]string{"-scenarios", "f,a',a"}, false, func(o benchOptions) bool {
			return len(o.Scenarios) == 3 && o.Scenarios[0] == scenBusiness && o.Scenarios[1] == scenBusinessNoLog && o.Scenarios[2] == scenSignIn
		}},
		{[]string{"-scenarios", "z"}, true, nil},
		{[]string{"-runs", "0"}, true, nil},
		{[]string{"extra"}, true, nil},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, err := parseBenchFlags(tc.args, &bytes.Buffer{})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %t", err, tc.wantErr)
			}
			if err == nil && !tc.check(o) {
				t.Errorf("got %+v", o)
			}
		})
	}
}
