package config

import (
	"os"
	"reflect"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestDefaultValidates(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Errorf("got %v, want Default() to validate", err)
	}
}

// TestShippedFileIsDefault keeps the shipped sidecar.yaml true: it must
// decode to exactly Default(), so the values it documents are the defaults.
func TestShippedFileIsDefault(t *testing.T) {
	got, err := Load("../sidecar.yaml")
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	if want := Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

// TestShippedFileDocumentsEveryKey checks that every setting appears in the
// shipped sidecar.yaml with a comment, so a new field cannot ship
// undocumented.
func TestShippedFileDocumentsEveryKey(t *testing.T) {
	doc, probs := parseDocument(readFile(t, "../sidecar.yaml"))
	if len(probs) > 0 {
		t.Fatalf("got %v, want the file to parse", probs)
	}
	ix, _ := index(doc)
	keys := map[string]*yaml.Node{}
	for _, e := range ix.entries {
		if e.key != nil {
			keys[e.path] = e.key
		}
	}
	for _, path := range settingPaths(reflect.TypeFor[Config](), "") {
		t.Run(path, func(t *testing.T) {
			k, ok := keys[path]
			if !ok {
				t.Fatalf("got no %s in sidecar.yaml, want it there with its default", path)
			}
			if k.HeadComment == "" && k.LineComment == "" {
				t.Errorf("got %s (line %d) without a comment, want one saying what it does", path, k.Line)
			}
		})
	}
}

// settingPaths lists the paths of every setting (a key whose value is not a
// section) under t.
func settingPaths(t reflect.Type, prefix string) []string {
	var paths []string
	for name, i := range yamlFields(t) {
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if ft := t.Field(i).Type; ft.Kind() == reflect.Struct && !isLeaf(ft) {
			paths = append(paths, settingPaths(ft, path)...)
			continue
		}
		paths = append(paths, path)
	}
	return paths
}

// TestDefaultRoundTrip checks that Default() marshals to YAML that parses
// back to Default(), i.e. Duration and Rate marshal the way they unmarshal.
func TestDefaultRoundTrip(t *testing.T) {
	out, err := yaml.Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse("marshalled.yaml", out)
	if err != nil {
		t.Fatalf("got error %v, want none; yaml:\n%s", err, out)
	}
	if want := Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestDefaultReturnsFreshSlices(t *testing.T) {
	a := Default()
	a.Routes.CookieOnly[0] = "/changed"
	a.Routes.Admin[0].Roles[0] = "changed"
	b := Default()
	if got, want := b.Routes.CookieOnly[0], "/api/mcp-oauth/authorize"; got != want {
		t.Errorf("got cookie_only[0] %q, want %q", got, want)
	}
	if got, want := b.Routes.Admin[0].Roles[0], "admin"; got != want {
		t.Errorf("got admin[0].roles[0] %q, want %q", got, want)
	}
}

func TestBaseOriginAndSecure(t *testing.T) {
	tests := []struct {
		baseURL    string
		wantOrigin string
		wantSecure bool
	}{
		{"http://localhost:8080", "http://localhost:8080", false},
		{"https://app.example.com", "https://app.example.com", true},
		{"https://app.example.com/auth/", "https://app.example.com", true},
		{"HTTPS://App.Example.COM:443/x", "https://app.example.com", true},
		{"http://app.example.com:80", "http://app.example.com", false},
		{"http://app.example.com:443", "http://app.example.com:443", false},
		{"https://app.example.com:8443", "https://app.example.com:8443", true},
		{"http://[::1]:8080", "http://[::1]:8080", false},
		{"https://[2001:db8::1]:443", "https://[2001:db8::1]", true},
		{"http://app.example.com:", "http://app.example.com", false},
		{"::not a url", "", false},
		{"/relative", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.baseURL, func(t *testing.T) {
			c := Default()
			c.BaseURL = tt.baseURL
			if got := c.BaseOrigin(); got != tt.wantOrigin {
				t.Errorf("got BaseOrigin %q, want %q", got, tt.wantOrigin)
			}
			if got := c.Secure(); got != tt.wantSecure {
				t.Errorf("got Secure %v, want %v", got, tt.wantSecure)
			}
		})
	}
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
