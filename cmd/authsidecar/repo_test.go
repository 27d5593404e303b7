package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoBuiltFilesCommitted fails when a compiled program or another
// large file is tracked: a `go build` run inside cmd/authsidecar-bench
// once put a 26 MB binary in the repository, twice. Sources, docs and
// test data stay well under the bound.
func TestNoBuiltFilesCommitted(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout (a source archive): nothing tracked to check")
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	const most = 512 << 10
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		f, err := os.Open(filepath.Join(root, name))
		if err != nil {
			continue // deleted in the work tree, not yet committed
		}
		head := make([]byte, 4)
		n, _ := f.Read(head)
		st, _ := f.Stat()
		f.Close()
		if bytes.Equal(head[:n], []byte("\x7fELF")) || bytes.HasPrefix(head[:n], []byte("MZ")) {
			t.Errorf("%s is a compiled program: build into the repository's root (ignored) or elsewhere, and git rm --cached it", name)
		}
		if st != nil && st.Size() > most {
			t.Errorf("%s is %d bytes (most %d): is it built output?", name, st.Size(), most)
		}
	}
}

// layers places every package of the module (docs/development.md,
// "Layout"): a package imports only packages of lower layers, so nothing
// imports one above it and the graph has no cycle. A new package gets a
// line here, which is where to think about where it belongs.
var layers = map[string]int{
	"internal/": 0, // every internal package: helpers that import no other layer (Go keeps them acyclic among themselves)
	"config":    1, "health": 1, "server": 1, "webclient": 1, "demoidp": 1, "mail": 1, "revocation": 1, "passhash": 1,
	"proxy": 2, "issuer": 2,
	"userimport": 3, // checks lines by issuer's rules; the store writes its records
	"jwks":       4, "sqlstore": 4,
	"betterauth": 4, // reads Better Auth's database into issuer's records, hashes checked by passhash
	"idp":        5, "legacy": 5,
	"sidecar": 6,
	"cmd/":    7,
}

// onlyConfig: the packages that may read config. Every other package
// takes options, so it can be used and tested without a config file.
var onlyConfig = map[string]bool{"sidecar": true, "cmd/authsidecar": true, "cmd/authsidecar-bench": true}

func layerOf(pkg string) (int, bool) {
	if l, ok := layers[pkg]; ok {
		return l, true
	}
	for prefix, l := range layers {
		if strings.HasSuffix(prefix, "/") && strings.HasPrefix(pkg, prefix) {
			return l, true
		}
	}
	return 0, false
}

func TestPackageLayers(t *testing.T) {
	const module = "github.com/authsidecar/authsidecar/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		from, ok := layerOf(pkg)
		if !ok {
			t.Errorf("package %s has no layer: add it to layers", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			imp = strings.TrimPrefix(imp, module)
			to, ok := layerOf(imp)
			switch {
			case !ok:
				t.Errorf("package %s has no layer: add it to layers", imp)
			case to >= from && !(strings.HasPrefix(pkg, "internal/") && strings.HasPrefix(imp, "internal/")):
				t.Errorf("%s (layer %d) imports %s (layer %d): a package imports only lower layers", pkg, from, imp, to)
			case imp == "config" && !onlyConfig[pkg]:
				t.Errorf("%s imports config: only %v read the configuration; take options instead", pkg, onlyConfig)
			}
		}
	}
}
