package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// cli runs one command through run exactly as main does, with secret as
// AUTH_SECRET ("" for unset) and stdin.
func cli(t *testing.T, secret, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		if k == "AUTH_SECRET" {
			return secret
		}
		return ""
	}
	err = run(context.Background(), args, getenv, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

// argv is "CMD SUB -config cfgPath ARGS...": flags before arguments.
func argv(cfgPath, cmd string, args ...string) []string {
	return append(append(strings.Fields(cmd), "-config", cfgPath), args...)
}

// mustCLI is cli that fails the test on an error.
func mustCLI(t *testing.T, secret, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := cli(t, secret, stdin, args...)
	if err != nil {
		t.Fatalf("%s: got %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// table splits tabular output into rows of columns (two or more spaces
// apart), header row included.
func table(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		rows = append(rows, regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1))
	}
	return rows
}

// echoUpstream answers with the identity the sidecar forwarded.
func echoUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"user": r.Header.Get("X-User-Id"), "path": r.URL.Path})
	}))
	t.Cleanup(up.Close)
	return up
}

// signUp creates a user on the running sidecar and returns its session
// cookie ("name=value") and a JWT from get-session.
func signUp(t *testing.T, s *instance, email, password string) (cookie, jwt string) {
	t.Helper()
	res, body := s.do(t, "POST", "/api/auth/sign-up/email", fmt.Sprintf(`{"name":"N","email":%q,"password":%q}`, email, password))
	if res.StatusCode != 200 || len(res.Cookies()) != 1 {
		t.Fatalf("sign-up %s: got %d %s", email, res.StatusCode, body)
	}
	cookie = res.Cookies()[0].Name + "=" + res.Cookies()[0].Value
	return cookie, getJWT(t, s, cookie)
}

func getJWT(t *testing.T, s *instance, cookie string) string {
	t.Helper()
	res, body := s.do(t, "GET", "/api/auth/get-session", "", "Cookie", cookie)
	jwt := res.Header.Get("Set-Auth-Jwt")
	if res.StatusCode != 200 || jwt == "" {
		t.Fatalf("get-session: got %d %s, want 200 with a JWT", res.StatusCode, body)
	}
	return jwt
}

// kidOf returns the kid in a JWT's header.
func kidOf(t *testing.T, jwt string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(jwt, ".")[0])
	var h struct{ Kid string }
	if err != nil || json.Unmarshal(b, &h) != nil || h.Kid == "" {
		t.Fatalf("JWT header %q: no kid (%v)", b, err)
	}
	return h.Kid
}

// status is the status of an authenticated GET on the running sidecar.
func status(t *testing.T, s *instance, path, jwt string) int {
	t.Helper()
	res, _ := s.do(t, "GET", path, "", "Authorization", "Bearer "+jwt)
	return res.StatusCode
}

func TestAdminGrammar(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in the error
	}{
		{"keys without SUB", []string{"keys"}, "keys needs a subcommand: list, rotate"},
		{"roles without SUB", []string{"roles"}, "grant, revoke, list"},
		{"users without SUB", []string{"users"}, "list, delete, set-password"},
		{"db without SUB", []string{"db"}, "db needs a subcommand: backup"},
		{"unknown SUB", []string{"keys", "delete"}, `unknown keys subcommand "delete": want list, rotate`},
		{"flag before SUB", []string{"users", "-config", "x.yaml", "list"}, "subcommand before flags"},
		{"argument to keys list", []string{"keys", "list", "extra"}, "keys list takes no arguments"},
		{"argument to keys rotate", []string{"keys", "rotate", "now"}, "keys rotate takes no arguments"},
		{"argument to users list", []string{"users", "list", "x"}, "users list takes no arguments"},
		{"grant without ROLE", []string{"roles", "grant", "ann@example.com"}, "roles grant takes EMAIL ROLE, got 1 argument"},
		{"grant with three", []string{"roles", "grant", "ann@example.com", "admin", "ops"}, "got 3 arguments"},
		{"revoke without args", []string{"roles", "revoke"}, "roles revoke takes EMAIL ROLE, got 0 arguments"},
		{"list with two", []string{"roles", "list", "a@example.com", "b@example.com"}, "roles list takes [EMAIL], got 2 arguments"},
		{"delete without EMAIL", []string{"users", "delete"}, "users delete takes EMAIL"},
		{"set-password with two", []string{"users", "set-password", "a@example.com", "pw"}, "users set-password takes EMAIL, got 2"},
		{"backup without FILE", []string{"db", "backup"}, "db backup takes FILE, got 0"},
		{"backup to stdout", []string{"db", "backup", "-"}, "not stdout"},
		{"unknown flag after EMAIL", []string{"users", "delete", "ann@example.com", "-nope"}, "flag provided but not defined"},
		{"three arguments around a flag", []string{"roles", "grant", "ann@example.com", "-config", "x.yaml", "admin", "ops"}, "got 3 arguments"},
		{"unknown flag", []string{"keys", "list", "-nope"}, "flag provided but not defined"},
		{"role with capitals", []string{"roles", "grant", "ann@example.com", "Admin"}, "role Admin: want [a-z0-9_-]+"},
		{"role with a space", []string{"roles", "revoke", "ann@example.com", "a b"}, "want [a-z0-9_-]+"},
		{"import without FILE", []string{"users", "import"}, "users import takes FILE, got 0 arguments"},
		{"import with a bad conflict mode", []string{"users", "import", "-on-conflict", "merge", "u.jsonl"}, "-on-conflict merge: want fail, skip or update"},
		{"import from stdin without a format", []string{"users", "import", "-"}, "stdin has no file extension: give -format jsonl or -format csv"},
		{"import of an unknown extension", []string{"users", "import", "users.json"}, "users.json: the extension says neither JSON Lines (.jsonl, .ndjson) nor CSV (.csv): give -format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No config file exists: grammar is checked before anything is read.
			_, _, err := cli(t, e2eSecret, "", tt.args...)
			if !errors.Is(err, errUsage) {
				t.Fatalf("got %v, want a usage error (exit 2)", err)
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("got %q, want one line containing %q", err, tt.want)
			}
		})
	}
}

// TestAdminHelp: -h works on every command and subcommand, and says
// whether the secret is needed.
func TestAdminHelp(t *testing.T) {
	needsSecret := map[string]bool{
		"serve": true, "check": true, "keys list": true, "keys rotate": true, "users set-password": true,
		"outbox retry": true, "db import-better-auth": true,
	}
	var paths []string
	for _, c := range commands {
		if c.subs == nil {
			paths = append(paths, c.name)
		}
		for _, s := range c.subs {
			paths = append(paths, c.name+" "+s.name)
		}
	}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			_, errOut, err := cli(t, "", "", append(strings.Fields(p), "-h")...)
			if err != nil {
				t.Fatalf("got %v, want nil", err)
			}
			if !strings.Contains(errOut, "Usage: authsidecar "+p+" [-config FILE]") {
				t.Errorf("got %q, want the usage of %s", errOut, p)
			}
			want := "Does not need the secret."
			if needsSecret[p] {
				want = "Needs the secret in the environment variable named by auth.secret_env (default AUTH_SECRET)."
			}
			if !strings.Contains(errOut, want) {
				t.Errorf("got %q, want it to say %q", errOut, want)
			}
		})
	}
	for _, args := range [][]string{{"keys", "-h"}, {"roles", "help"}, {"users", "--help"}, {"db", "-h"}} {
		_, errOut, err := cli(t, "", "", args...)
		if err != nil || !strings.Contains(errOut, "Subcommands") {
			t.Errorf("%v: got %v %q, want the subcommand list", args, err, errOut)
		}
	}
	_, errOut, _ := cli(t, "", "", "-h")
	for _, p := range paths {
		if !strings.Contains(errOut, "  "+p) {
			t.Errorf("authsidecar -h: got %q, want it to list %q", errOut, p)
		}
	}
}

// TestAdminNeedsDatabase: an admin command pointed at a database that does
// not exist fails instead of creating an empty one.
func TestAdminNeedsDatabase(t *testing.T) {
	dir := t.TempDir()
	cfgPath, _ := writeConfig(t, dir, "")
	for _, c := range []struct{ cmd, arg string }{
		{"keys list", ""}, {"keys rotate", ""}, {"roles grant", "a@example.com admin"}, {"roles list", ""},
		{"users list", ""}, {"users delete", "a@example.com"}, {"users set-password", "a@example.com"},
		{"db backup", filepath.Join(dir, "b.db")},
	} {
		_, _, err := cli(t, e2eSecret, "password-123\n", argv(cfgPath, c.cmd, strings.Fields(c.arg)...)...)
		if err == nil || !strings.Contains(err.Error(), "does not exist") || errors.Is(err, errUsage) {
			t.Errorf("%s: got %v, want a non-usage error saying the database does not exist", c.cmd, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "auth.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("database file: got %v, want it not created", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("backup file: got %v, want it not created", err)
	}
}
