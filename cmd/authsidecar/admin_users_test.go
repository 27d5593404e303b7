package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// userRows parses "users list" into email -> [id, name, created, sessions].
func userRows(t *testing.T, out string) map[string][]string {
	t.Helper()
	rows := table(out)
	if len(rows) == 0 || strings.Join(rows[0], " ") != "ID EMAIL NAME CREATED SESSIONS" {
		t.Fatalf("users list: got %q, want an ID EMAIL NAME CREATED SESSIONS table", out)
	}
	m := map[string][]string{}
	for _, r := range rows[1:] {
		if len(r) != 5 {
			t.Fatalf("users list row: got %q, want 5 columns", r)
		}
		m[r[1]] = []string{r[0], r[2], r[3], r[4]}
	}
	return m
}

func TestUsersCommands(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t)
	cfgPath, port := writeConfig(t, t.TempDir(), fmt.Sprintf("upstream: %q\n", up.URL))
	s := startSidecar(t, cfgPath, port, e2eSecret)
	annCookie, _ := signUp(t, s, "ann@example.com", "correct-horse-battery")
	bobCookie, bobJWT := signUp(t, s, "bob@example.com", "correct-horse-battery")

	// No secret needed to list.
	users := userRows(t, mustCLI(t, "", "", argv(cfgPath, "users list")...))
	if len(users) != 2 || users["ann@example.com"] == nil || users["bob@example.com"] == nil {
		t.Fatalf("users list: got %v, want ann and bob", users)
	}
	for email, u := range users {
		if len(u[0]) != 32 || u[1] != "N" || u[3] != "1" {
			t.Errorf("users list %s: got %v, want a 32-char id, name N and 1 live session", email, u)
		}
	}

	signIn := func(password string) int {
		res, _ := s.do(t, "POST", "/api/auth/sign-in/email", fmt.Sprintf(`{"email":"ann@example.com","password":%q}`, password))
		return res.StatusCode
	}
	refused := []struct {
		name, secret, stdin, email, want string
	}{
		{"no secret", "", "new-password-123\n", "ann@example.com", "AUTH_SECRET is not set"},
		{"unknown email", e2eSecret, "new-password-123\n", "nobody@example.com", "no user with email nobody@example.com"},
		{"empty stdin", e2eSecret, "", "ann@example.com", "no password on stdin"},
		{"empty first line", e2eSecret, "\nnew-password-123\n", "ann@example.com", "no password on stdin"},
		{"too short", e2eSecret, "short\n", "ann@example.com", "password too short: 5 characters, auth.min_password_length is 8"},
		{"too long", e2eSecret, strings.Repeat("é", 129) + "\n", "ann@example.com", "password too long: 129 characters, auth.max_password_length is 128"},
		{"way too long", e2eSecret, strings.Repeat("x", 10000), "ann@example.com", "password too long"},
		{"not UTF-8", e2eSecret, "password\xff\n", "ann@example.com", "not valid UTF-8"},
	}
	for _, tt := range refused {
		_, _, err := cli(t, tt.secret, tt.stdin, argv(cfgPath, "users set-password", tt.email)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("set-password, %s: got %v, want %q", tt.name, err, tt.want)
		}
	}
	if got := signIn("correct-horse-battery"); got != 200 {
		t.Fatalf("sign-in after refused set-passwords: got %d, want 200 (password unchanged)", got)
	}

	// The line ending ("\r\n" too) is not part of the password; the email
	// is matched lower-cased.
	out := mustCLI(t, e2eSecret, "new-password-é-123\r\n", argv(cfgPath, "users set-password", "Ann@Example.com")...)
	if !strings.Contains(out, "password changed for ann@example.com") {
		t.Errorf("set-password: got %q, want it to say the password changed", out)
	}
	if got := signIn("new-password-é-123"); got != 200 {
		t.Errorf("sign-in with the new password: got %d, want 200", got)
	}
	if got := signIn("correct-horse-battery"); got != 401 {
		t.Errorf("sign-in with the old password: got %d, want 401", got)
	}
	if getJWT(t, s, annCookie) == "" {
		t.Error("ann's session did not survive set-password")
	}

	out = mustCLI(t, "", "", argv(cfgPath, "users delete", "bob@example.com")...)
	for _, want := range []string{
		"deleted user bob@example.com (id " + users["bob@example.com"][0] + ") with its 1 session, 0 roles and password",
		"every JWT issued to this user is revoked: running sidecars refuse it within revocation.poll_interval (1s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("users delete: got %q, want %q", out, want)
		}
	}
	// The session is gone, and so is the JWT: the running sidecar reads
	// the CLI's revocation at its next poll.
	if res, body := s.do(t, "GET", "/api/auth/get-session", "", "Cookie", bobCookie); string(body) != "null" {
		t.Errorf("deleted user's session: got %d %s, want null", res.StatusCode, body)
	}
	for deadline := time.Now().Add(3 * time.Second); status(t, s, "/api/tasks", bobJWT) != 401; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("deleted user's JWT still passes 3s after users delete, want 401 within revocation.poll_interval (1s)")
		}
	}
	if got := status(t, s, "/api/tasks", getJWT(t, s, annCookie)); got != 200 {
		t.Errorf("another user's JWT after users delete: got %d, want 200", got)
	}
	users = userRows(t, mustCLI(t, "", "", argv(cfgPath, "users list")...))
	if len(users) != 1 || users["ann@example.com"] == nil {
		t.Errorf("users list after delete: got %v, want ann alone", users)
	}
	_, _, err := cli(t, "", "", argv(cfgPath, "users delete", "bob@example.com")...)
	if err == nil || errors.Is(err, errUsage) || !strings.Contains(err.Error(), "no user with email bob@example.com") {
		t.Errorf("deleting bob again: got %v, want no user with email bob@example.com", err)
	}
}
