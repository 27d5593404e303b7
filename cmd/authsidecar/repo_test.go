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
