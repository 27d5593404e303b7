package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authsidecar/authsidecar/internal/oidctest"
)

// TestCheckIdentityProviders: check names a provider whose secret is not
// in the environment; without -online it contacts no provider; with it,
// it reports what a real OpenID provider's discovery and JWKS say, and
// fails for one that is down.
func TestCheckIdentityProviders(t *testing.T) {
	op := oidctest.StartOP(t, nil)
	dir := t.TempDir()
	path := filepath.Join(dir, "sidecar.yaml")
	body := fmt.Sprintf(`database: { path: %q }
identity_providers:
  - {id: corp, kind: oidc, issuer: %q, client_id: authsidecar, client_secret_env: CORP_SECRET}
  - {id: gh, kind: github, client_id: Iv1.x, client_secret_env: GH_SECRET}
  - {id: down, kind: oidc, issuer: "http://127.0.0.1:1", client_id: x}
`, filepath.Join(dir, "auth.db"), op.Issuer)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AUTH_SECRET": e2eSecret, "CORP_SECRET": "s"}
	check := func(args ...string) (string, error) {
		var out, errOut strings.Builder
		err := run(context.Background(), append([]string{"check", "-config", path}, args...), func(k string) string { return env[k] }, strings.NewReader(""), &out, &errOut)
		return out.String(), err
	}
	out, err := check()
	if err == nil || !strings.Contains(out, "FAIL  identity_providers[1].client_secret_env: $GH_SECRET is not set") {
		t.Errorf("missing secret: got %v\n%s", err, out)
	}
	env["GH_SECRET"] = "s"
	out, err = check()
	if err != nil || !strings.Contains(out, "ok    identity provider corp (oidc): not contacted") || !strings.Contains(out, "all checks passed") {
		t.Errorf("offline: got %v\n%s", err, out)
	}
	out, err = check("-online")
	for _, want := range []string{
		"ok    identity provider corp (oidc): issuer " + op.Issuer + ", authorization " + op.Issuer + "/auth, token " + op.Issuer + "/oauth/token, jwks " + op.Issuer + "/keys",
		"(1 key; RS256)",
		"ok    identity provider gh (github): nothing to fetch",
		"FAIL  identity provider down: identity provider unavailable: discovery:",
		"1 problem found",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("online: got %v\n%s\nwant %q in it", err, out, want)
		}
	}
}
