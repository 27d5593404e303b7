package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/oidctest"
)

// TestBetterAuthClientSocial runs Better Auth's official client against
// the built binary with a real OpenID provider: signIn.social, the
// provider's login, the callback, getSession's JWT, a business call.
func TestBetterAuthClientSocial(t *testing.T) {
	dir := needBetterAuth(t, "betterauth-client")
	up := echoUpstream(t)
	cfgPath, port := writeConfig(t, t.TempDir(), fmt.Sprintf("upstream: %q\n", up.URL))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	op := oidctest.StartOP(t, []string{base + "/api/auth/callback/corp"})
	f, err := os.OpenFile(cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "identity_providers: [{id: corp, kind: oidc, issuer: %q, client_id: %s, client_secret_env: CORP_CLIENT_SECRET}]\n", op.Issuer, op.ClientID)
	f.Close()
	startBinary(t, cfgPath, port, "AUTH_SECRET="+e2eSecret, "CORP_CLIENT_SECRET="+op.ClientSecret)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "social-check.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BASE_URL="+base, "PROVIDER=corp", "OP_USERNAME="+oidctest.Alice.Username, "OP_PASSWORD="+oidctest.Alice.Password)
	out, err := cmd.CombinedOutput()
	t.Logf("social-check:\n%s", out)
	if err != nil {
		t.Fatalf("Better Auth client social check failed: %v", err)
	}
	if !regexp.MustCompile(`(?m)^1[0-9] passed, 0 failed$`).Match(out) {
		t.Fatal("social check did not report every check passed")
	}
}
