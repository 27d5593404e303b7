//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestReadmeLinks checks that every link of the README and of docs/ to a
// heading ("#anchor", "file.md#anchor") names one, and every relative link
// names a file of the repository.
func TestReadmeLinks(t *testing.T) {
	docs, _ := filepath.Glob("../../docs/*.md")
	for _, file := range append([]string{"../../README.md"}, docs...) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(text)) {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link to %s: no such file", file, l.line, target)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			destText, err := os.ReadFile(dest)
			if err != nil {
				t.Errorf("%s:%d: link to %s: %v", file, l.line, target, err)
				continue
			}
			if !markdownAnchors(string(destText))[anchor] {
				t.Errorf("%s:%d: link to %s: no heading has the anchor %q", file, l.line, target, anchor)
			}
		}
	}
}

type markdownLink struct {
	line   int
	target string
}

var markdownLinkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// markdownLinks are the inline links outside fenced blocks.
func markdownLinks(text string) []markdownLink {
	var links []markdownLink
	fenced := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range markdownLinkRE.FindAllStringSubmatch(line, -1) {
			links = append(links, markdownLink{n, m[1]})
		}
	}
	return links
}

// markdownAnchors are the anchors GitHub gives the headings: lower case,
// punctuation other than "-" and "_" dropped, spaces as "-", and "-1",
// "-2", ... after a repeated one.
func markdownAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	count := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := count[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		count[a]++
	}
	return anchors
}

// readmeTestCommand is the README's test command: the one command that sets
// up what the tests need and runs every one of them.
const readmeTestCommand = "scripts/test"

// TestReadmeTestCommandInCI: the README gives readmeTestCommand as the test
// command (TestReadmeCommands does not run it: it is what runs it); CI runs
// exactly it; it runs go test -race over every package, and sets up every
// Node package the tests use (each testdata/*/package-lock.json), so a
// fresh machine cannot skip the Better Auth tests for want of npm ci.
func TestReadmeTestCommandInCI(t *testing.T) {
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := readmeBlocks("README.md", string(text))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(blocks, func(b readmeBlock) bool { return b.info == "sh" && b.first() == readmeTestCommand }) {
		t.Errorf("README.md gives no sh block starting with the test command %q", readmeTestCommand)
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(ci), "\n"), readmeTestCommand) {
		t.Errorf(".ci/run has no line running exactly the README's test command %q", readmeTestCommand)
	}
	script, err := os.ReadFile("../../" + readmeTestCommand)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "go test -race") || !strings.Contains(string(script), "./...") {
		t.Errorf("%s does not run go test -race over ./...", readmeTestCommand)
	}
	locks, _ := filepath.Glob("../../testdata/*/package-lock.json")
	if len(locks) == 0 {
		t.Fatal("no testdata/*/package-lock.json: the Better Auth tests' Node packages are gone?")
	}
	for _, lock := range locks {
		dir := "testdata/" + filepath.Base(filepath.Dir(lock))
		if !strings.Contains(string(script), dir) {
			t.Errorf("%s does not npm ci in %s, whose packages a test needs", readmeTestCommand, dir)
		}
	}
}
