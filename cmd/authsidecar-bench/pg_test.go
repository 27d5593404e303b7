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

// TestPostgresSkipped: without PostgreSQL (no binaries, no URL) the
// PostgreSQL scenarios are reported as skipped, with the reason, and the
// run succeeds.
func TestPostgresSkipped(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command to build ./cmd/authsidecar")
	}
	if testing.Short() {
		t.Skip("builds and runs the benchmark")
	}
	t.Setenv(envDatabaseURL, "")
	old := initdbGlob
	initdbGlob = filepath.Join(t.TempDir(), "*", "initdb")
	defer func() { initdbGlob = old }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	var stdout, stderr bytes.Buffer
	if err := run(ctx, []string{"-smoke", "-scenarios", "e-pg,f-pg", "-json", jsonPath}, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != 2 {
		t.Fatalf("got %d scenarios, want e-pg and f-pg", len(rep.Scenarios))
	}
	for _, s := range rep.Scenarios {
		if !strings.HasPrefix(s.Skipped, "no PostgreSQL") || len(s.Runs) != 0 {
			t.Errorf("%s: got skipped %q and %d runs, want skipped for want of PostgreSQL, no runs", s.Key, s.Skipped, len(s.Runs))
		}
		if !strings.Contains(stdout.String(), "- "+s.Key+" skipped: no PostgreSQL") {
			t.Errorf("the table's notes do not say %s was skipped:\n%s", s.Key, stdout.String())
		}
		if strings.Contains(stdout.String(), "| "+s.Label+" |") {
			t.Errorf("the table has a row for skipped %s", s.Key)
		}
	}
}
