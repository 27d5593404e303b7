package proxy

import (
	"os/exec"
	"strings"
	"testing"
)

// TestVerifyPathReachesNoStore keeps the rule docs/architecture.md states:
// the verify path (proxy, and jwks in verifier mode) has no way to reach a
// database, because nothing it imports can open or query one, and it takes
// options, never the config. Its only doors to stored data are the small
// interfaces proxy declares (KeySource, SessionLookup, RoleLookup), which
// the sidecar fills.
func TestVerifyPathReachesNoStore(t *testing.T) {
	const module = "github.com/authsidecar/authsidecar/"
	forbidden := []string{
		"database/sql", "github.com/jackc/pgx", "modernc.org/sqlite",
		module + "sqlstore", module + "issuer", module + "mail", module + "config",
	}
	for pkg, name := range map[string]string{".": "proxy", "../jwks": "jwks"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s imports %s (directly or through another package): the verify path must not reach a store or the config", name, dep)
				}
			}
		}
	}
}
