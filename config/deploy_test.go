package config

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestDeployConfigs: every sidecar config shipped in deploy/ (the systemd
// file and each ConfigMap's sidecar.yaml in the Kubernetes manifests)
// passes the same strict parse serve runs, and says what the manifest
// around it promises (mode, driver), so an example cannot rot into a file
// that stops start-up.
func TestDeployConfigs(t *testing.T) {
	want := map[string]struct {
		mode   Mode
		driver Driver
	}{
		"systemd/sidecar.yaml":                          {"full", "sqlite"},
		"kubernetes/authsidecar.yaml authsidecar":       {"full", "sqlite"},
		"kubernetes/replicas.yaml authsidecar-replicas": {"full", "postgres"},
		"kubernetes/replicas.yaml authsidecar-verifier": {"verifier", "none"},
	}
	got := map[string][]byte{}
	raw, err := os.ReadFile("../deploy/systemd/sidecar.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got["systemd/sidecar.yaml"] = raw
	manifests, err := filepath.Glob("../deploy/kubernetes/*.yaml")
	if err != nil || len(manifests) == 0 {
		t.Fatalf("no manifests in ../deploy/kubernetes (%v)", err)
	}
	for _, m := range manifests {
		raw, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var doc struct {
				Kind     string
				Metadata struct{ Name string }
				Data     map[string]string
			}
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", m, err)
			}
			if doc.Kind == "ConfigMap" && doc.Data["sidecar.yaml"] != "" {
				got["kubernetes/"+filepath.Base(m)+" "+doc.Metadata.Name] = []byte(doc.Data["sidecar.yaml"])
			}
		}
	}
	for name, w := range want {
		data, ok := got[name]
		if !ok {
			t.Errorf("%s: no such config in deploy/", name)
			continue
		}
		cfg, err := Parse(name, data)
		if err != nil {
			t.Errorf("%s does not parse:\n%v", name, err)
			continue
		}
		if cfg.Mode != w.mode || cfg.Database.Driver != w.driver {
			t.Errorf("%s: got mode %q, driver %q; want %q, %q", name, cfg.Mode, cfg.Database.Driver, w.mode, w.driver)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: a config in deploy/ this test does not know; add it to the table", name)
		}
	}
}
