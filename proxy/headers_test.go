package proxy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestIdentityHeadersDocumented: the list of identity headers stripped by
// default in docs/limits.md is exactly identityHeaders.
func TestIdentityHeadersDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/limits.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "## Identity headers the upstream never gets from a client\n")
	section, _, _ = strings.Cut(section, "\nNames are compared")
	_, list, ok := strings.Cut(section, "\n- ")
	if !ok {
		t.Fatal("docs/limits.md: no list of identity headers")
	}
	var documented []string
	name := regexp.MustCompile("`([A-Za-z0-9-]+)`")
	for _, item := range strings.Split(list, "\n- ") {
		_, names, _ := strings.Cut(item, ":") // after "who sets them:"
		for _, m := range name.FindAllStringSubmatch(names, -1) {
			documented = append(documented, m[1])
		}
	}
	want := slices.Sorted(slices.Values(slices.Concat(identityHeaders, identityPrefixes)))
	if got := slices.Sorted(slices.Values(documented)); !slices.Equal(got, want) {
		t.Errorf("docs/limits.md lists\n%q\nthe code strips\n%q", got, want)
	}
}
