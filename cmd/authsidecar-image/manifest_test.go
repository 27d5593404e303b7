package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"gopkg.in/yaml.v3"
)

type container struct {
	Name    string
	Image   string
	Command []string
	Args    []string
}

// podContainers are the containers of every Deployment (or other
// workload with a pod template) in a multi-document manifest.
func podContainers(t *testing.T, path string) []container {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []container
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var doc struct {
			Spec struct {
				Template struct {
					Spec struct {
						Containers []container
					}
				}
			}
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, doc.Spec.Template.Spec.Containers...)
	}
	return out
}
