package config

import (
	"bytes"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

var updateRule = flag.Bool("update-rule", false, "regenerate deploy/kubernetes/prometheusrule.yaml from deploy/prometheus/rules.yml")

const prometheusRuleHeader = `# Generated from deploy/prometheus/rules.yml by
#   go test ./config -run TestPrometheusRuleManifest -update-rule
# Do not edit: change rules.yml (and its promtool tests) and regenerate.
#
# The same rules for the Prometheus Operator. Its Prometheus selects
# PrometheusRules by label (ruleSelector): add the label yours expects.
# AuthsidecarDown matches up{job="authsidecar"}; under the operator the job
# label depends on the scrape (a ServiceMonitor: the Service's name by
# default; a PodMonitor: namespace/name): adjust the matcher.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: authsidecar
spec:
`

// prometheusRule renders rules.yml as a PrometheusRule: its groups,
// comments included, indented under spec.
func prometheusRule(rules []byte) []byte {
	text := string(rules)
	start := strings.Index(text, "\ngroups:")
	var b bytes.Buffer
	b.WriteString(prometheusRuleHeader)
	for _, line := range strings.SplitAfter(text[start+1:], "\n") {
		if strings.TrimSpace(line) != "" {
			b.WriteString("  ")
		}
		b.WriteString(line)
	}
	return b.Bytes()
}

// TestPrometheusRuleManifest: the Kubernetes PrometheusRule carries
// exactly the rules promtool tests (TestPrometheusRules), so the
// operator's copy cannot drift from the tested file.
func TestPrometheusRuleManifest(t *testing.T) {
	const manifest = "../deploy/kubernetes/prometheusrule.yaml"
	rules, err := os.ReadFile("../deploy/prometheus/rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	want := prometheusRule(rules)
	if *updateRule {
		if err := os.WriteFile(manifest, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not generated from rules.yml: run go test ./config -run TestPrometheusRuleManifest -update-rule", manifest)
	}
	// The text matches; check the YAML means the same too (a misplaced
	// indent would otherwise move rules out of spec.groups).
	var file struct{ Groups any }
	if err := yaml.Unmarshal(rules, &file); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string
		Spec       struct{ Groups any }
	}
	if err := yaml.Unmarshal(got, &doc); err != nil {
		t.Fatalf("%s: %v", manifest, err)
	}
	if doc.APIVersion != "monitoring.coreos.com/v1" || doc.Kind != "PrometheusRule" {
		t.Errorf("%s: got %s %s, want monitoring.coreos.com/v1 PrometheusRule", manifest, doc.APIVersion, doc.Kind)
	}
	if file.Groups == nil || !reflect.DeepEqual(doc.Spec.Groups, file.Groups) {
		t.Errorf("%s: spec.groups differ from rules.yml's groups", manifest)
	}
}
