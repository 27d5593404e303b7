package config

import (
	"os"
	"os/exec"
	"testing"
)

// TestPrometheusRules runs promtool on the shipped rules: `check rules`
// (valid PromQL, templates, names) and `test rules` (every alert fires in
// its case and stays quiet in the others, deploy/prometheus/rules_test.yml).
// Without promtool (Debian: apt-get install prometheus) it skips, and
// fails under CI, where .ci/run installs it.
func TestPrometheusRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("promtool is needed under CI: %v", err)
		}
		t.Skipf("promtool not installed (apt-get install prometheus): %v", err)
	}
	for _, args := range [][]string{
		{"check", "rules", "rules.yml"},
		{"test", "rules", "rules_test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "../deploy/prometheus"
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}
