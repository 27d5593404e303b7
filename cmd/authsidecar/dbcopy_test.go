package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authsidecar/authsidecar/internal/pgtest"
)

// TestDBCopySQLiteToPostgres is the move off the embedded default: users,
// sessions, keys and roles copied into PostgreSQL; afterwards old JWTs
// verify, old cookies are sessions, and old passwords sign in.
func TestDBCopySQLiteToPostgres(t *testing.T) {
	dir := t.TempDir()
	up := echoUpstream(t)
	sqliteCfg, port := writeConfigFile(t, dir, "sqlite.yaml", fmt.Sprintf("base_url: \"http://app.example.test\"\nupstream: %q\ndatabase: { driver: sqlite, path: %q }\n", up.URL, filepath.Join(dir, "old.db")))
	old := startBinary(t, sqliteCfg, port, "AUTH_SECRET="+e2eSecret)
	cookie, jwt := signUp(t, old.instance, "ann@example.com", "correct-horse-battery")
	signUp(t, old.instance, "bob@example.com", "battery-staple-horse")
	env := map[string]string{"AUTH_SECRET": e2eSecret}
	cliWithEnv(t, env, argv(sqliteCfg, "roles grant", "ann@example.com", "admin")...)
	if err := old.stop(); err != nil {
		t.Fatal(err)
	}

	url := pgtest.URL(t)
	env["DATABASE_URL"] = url
	pgCfg, pgPort := replicaConfig(t, dir, "postgres.yaml", up.URL, "")
	out := cliWithEnv(t, env, argv(pgCfg, "db copy", sqliteCfg)...)
	for _, want := range []string{"2 users", "2 accounts", "2 sessions", "1 signing key", "1 role", "postgres://"} {
		if !strings.Contains(out, want) {
			t.Errorf("db copy output %q does not say %q", out, want)
		}
	}
	if strings.Contains(out, urlPassword(t, url)) {
		t.Errorf("db copy output shows the database password: %q", out)
	}
	// A second copy is refused: the target is no longer empty.
	var stdout, stderr strings.Builder
	err := run(t.Context(), argv(pgCfg, "db copy", sqliteCfg), func(k string) string { return env[k] }, strings.NewReader(""), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "not empty") || !strings.Contains(err.Error(), "nothing was copied") {
		t.Errorf("second db copy: got %v, want a refusal of the non-empty target", err)
	}

	s := startBinary(t, pgCfg, pgPort, pgEnv(url)...).instance
	if got := status(t, s, "/api/tasks", jwt); got != 200 {
		t.Errorf("JWT issued before the copy: got %d, want 200", got)
	}
	if got := getJWT(t, s, cookie); kidOf(t, got) != kidOf(t, jwt) {
		t.Errorf("get-session with the old cookie signed with %s, want the copied key %s", kidOf(t, got), kidOf(t, jwt))
	}
	for email, pw := range map[string]string{"ann@example.com": "correct-horse-battery", "bob@example.com": "battery-staple-horse"} {
		if res, body := s.do(t, "POST", "/api/auth/sign-in/email", fmt.Sprintf(`{"email":%q,"password":%q}`, email, pw)); res.StatusCode != 200 {
			t.Errorf("sign-in of %s with the old password after the copy: got %d %s", email, res.StatusCode, body)
		}
	}
	if got := status(t, s, "/api/admin/x", jwt); got != 200 {
		t.Errorf("admin route for the copied role: got %d, want 200", got)
	}
}
