package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestRolesCommands grants and revokes a role while the sidecar runs: the
// admin route follows at the next request. Roles need no secret.
func TestRolesCommands(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t)
	cfgPath, port := writeConfig(t, t.TempDir(), fmt.Sprintf("upstream: %q\n", up.URL))
	s := startSidecar(t, cfgPath, port, e2eSecret)
	_, jwt := signUp(t, s, "ann@example.com", "correct-horse-battery")

	if got := status(t, s, "/api/admin/x", jwt); got != 403 {
		t.Fatalf("admin route before any grant: got %d, want 403", got)
	}
	steps := []struct {
		cmd, args string
		wantErr   string // in the error; empty: success
		wantOut   string // in stdout
		admin     int    // status of /api/admin/x afterwards; 0: not checked
	}{
		{cmd: "roles list", wantOut: "no roles granted"},
		{cmd: "roles grant", args: "ANN@Example.com admin", wantOut: "granted role admin to ann@example.com", admin: 200},
		{cmd: "roles grant", args: "ann@example.com admin", wantOut: "ann@example.com already has role admin", admin: 200},
		{cmd: "roles grant", args: "ann@example.com ops", wantOut: "note: no prefix in routes.admin of " + cfgPath + " accepts role ops"},
		{cmd: "roles grant", args: "nobody@example.com admin", wantErr: "no user with email nobody@example.com"},
		{cmd: "roles list", wantOut: "ann@example.com  admin"},
		{cmd: "roles list", args: "ann@example.com", wantOut: "ann@example.com  ops"},
		{cmd: "roles list", args: "nobody@example.com", wantErr: "no user with email nobody@example.com"},
		{cmd: "roles revoke", args: "ann@example.com admin", wantOut: "revoked role admin from ann@example.com", admin: 403},
		{cmd: "roles revoke", args: "ann@example.com admin", wantOut: "ann@example.com did not have role admin", admin: 403},
		{cmd: "roles revoke", args: "nobody@example.com admin", wantErr: "no user with email nobody@example.com"},
		{cmd: "roles revoke", args: "ann@example.com ops", wantOut: "revoked role ops"},
		{cmd: "roles list", args: "ann@example.com", wantOut: "ann@example.com has no roles"},
	}
	for _, st := range steps {
		name := st.cmd + " " + st.args
		// No secret in the environment: roles only need the config.
		out, _, err := cli(t, "", "", argv(cfgPath, st.cmd, strings.Fields(st.args)...)...)
		switch {
		case st.wantErr == "" && err != nil:
			t.Fatalf("%s: got %v, want success", name, err)
		case st.wantErr != "" && (err == nil || !strings.Contains(err.Error(), st.wantErr) || errors.Is(err, errUsage)):
			t.Fatalf("%s: got %v, want a (non-usage) error containing %q", name, err, st.wantErr)
		}
		if !strings.Contains(out, st.wantOut) {
			t.Errorf("%s: got %q, want %q", name, out, st.wantOut)
		}
		if st.admin != 0 {
			if got := status(t, s, "/api/admin/x", jwt); got != st.admin {
				t.Errorf("after %s: /api/admin/x got %d, want %d", name, got, st.admin)
			}
		}
	}
}
