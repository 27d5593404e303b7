package config

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"gopkg.in/yaml.v3"
)

// k8sObject is the part of a Kubernetes object the ServiceMonitor test
// follows: labels, a Service's selector and ports, a Deployment's Pod
// template, a ServiceMonitor's selector, job label and endpoints.
type k8sObject struct {
	Kind     string
	Metadata struct {
		Name   string
		Labels map[string]string
	}
	Spec struct {
		// Service
		Selector map[string]any
		Ports    []servicePort
		// Deployment
		Template struct {
			Metadata struct{ Labels map[string]string }
			Spec     struct {
				Containers []struct {
					Name  string
					Ports []struct {
						Name          string
						ContainerPort int `yaml:"containerPort"`
					}
				}
			}
		}
		// ServiceMonitor
		JobLabel  string `yaml:"jobLabel"`
		Endpoints []struct{ Port, Path string }
	}
}

type servicePort struct {
	Name       string
	Port       int
	TargetPort any `yaml:"targetPort"`
}

func k8sObjects(t *testing.T, path string) []k8sObject {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []k8sObject
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var o k8sObject
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, o)
	}
}

// selects says whether every key=value of selector is among labels.
func selects(selector map[string]string, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// TestServiceMonitor: deploy/kubernetes/servicemonitor.yaml scrapes the
// sidecars of authsidecar.yaml and replicas.yaml's app: its ServiceMonitor
// selects its metrics Service and no other Service of the manifests, the
// Service selects their Pods, the endpoint's port leads to the sidecar's
// "metrics" container port, and the job label it sets is the one
// AuthsidecarDown in rules.yml matches.
func TestServiceMonitor(t *testing.T) {
	const file = "../deploy/kubernetes/servicemonitor.yaml"
	rules, err := os.ReadFile("../deploy/prometheus/rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`up\{job="([^"]+)"\}`).FindSubmatch(rules)
	if m == nil {
		t.Fatal(`rules.yml: no up{job="..."} matcher`)
	}
	wantJob := string(m[1])

	mine := k8sObjects(t, file)
	var monitors []k8sObject
	for _, o := range mine {
		if o.Kind == "ServiceMonitor" {
			monitors = append(monitors, o)
		}
	}
	if len(monitors) != 1 {
		t.Fatalf("%s: %d ServiceMonitors, want 1", file, len(monitors))
	}
	sm := monitors[0].Spec
	smSelector := map[string]string{}
	if ml, ok := sm.Selector["matchLabels"].(map[string]any); ok {
		for k, v := range ml {
			smSelector[k], _ = v.(string)
		}
	}

	others, err := filepath.Glob("../deploy/kubernetes/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var services, deployments []k8sObject
	for _, path := range others {
		for _, o := range k8sObjects(t, path) {
			switch o.Kind {
			case "Service":
				if selects(smSelector, o.Metadata.Labels) && filepath.Base(path) != filepath.Base(file) {
					t.Errorf("the ServiceMonitor also selects Service %s of %s", o.Metadata.Name, path)
				}
			case "Deployment":
				if o.Metadata.Name == "app" {
					deployments = append(deployments, o)
				}
			}
		}
	}
	for _, o := range mine {
		if o.Kind == "Service" && selects(smSelector, o.Metadata.Labels) {
			services = append(services, o)
		}
	}
	if len(services) == 0 {
		t.Fatalf("the ServiceMonitor's selector %v selects no Service of %s", smSelector, file)
	}
	if len(deployments) < 2 {
		t.Fatalf("found %d app Deployments in authsidecar.yaml and replicas.yaml, want 2", len(deployments))
	}
	if len(sm.Endpoints) == 0 {
		t.Fatal("the ServiceMonitor has no endpoints")
	}

	for _, svc := range services {
		if job := svc.Metadata.Labels[sm.JobLabel]; job != wantJob {
			t.Errorf("Service %s: job label (%s) %q, rules.yml's AuthsidecarDown matches job %q", svc.Metadata.Name, sm.JobLabel, job, wantJob)
		}
		podSelector := map[string]string{}
		for k, v := range svc.Spec.Selector {
			podSelector[k], _ = v.(string)
		}
		for _, ep := range sm.Endpoints {
			if ep.Path != "/metrics" {
				t.Errorf("endpoint path %q, want /metrics", ep.Path)
			}
			i := slices.IndexFunc(svc.Spec.Ports, func(p servicePort) bool { return p.Name == ep.Port })
			if i < 0 {
				t.Errorf("Service %s has no port %q", svc.Metadata.Name, ep.Port)
				continue
			}
			target, _ := svc.Spec.Ports[i].TargetPort.(string)
			for _, d := range deployments {
				if !selects(podSelector, d.Spec.Template.Metadata.Labels) {
					t.Errorf("Service %s selector %v does not select Deployment %s's Pods (%v)", svc.Metadata.Name, podSelector, d.Metadata.Name, d.Spec.Template.Metadata.Labels)
					continue
				}
				found := false
				for _, c := range d.Spec.Template.Spec.Containers {
					for _, p := range c.Ports {
						if c.Name == "authsidecar" && p.Name == target && p.ContainerPort == svc.Spec.Ports[i].Port {
							found = true
						}
					}
				}
				if !found {
					t.Errorf("Deployment %s: no authsidecar container port named %q on %d (the Service's targetPort)", d.Metadata.Name, target, svc.Spec.Ports[i].Port)
				}
			}
		}
	}
}
