package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// refusedWithin waits until jwt gets want on a business route of s,
// failing after d.
func refusedWithin(t *testing.T, s *instance, jwt string, want int, d time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	for got := status(t, s, "/api/tasks", jwt); got != want; got = status(t, s, "/api/tasks", jwt) {
		if time.Since(start) > d {
			t.Fatalf("%s: got %d after %v, want %d", what, got, d, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// TestRevocationCommands: users revoke, users ban/unban and keys
// revoke-all against a running sidecar, which reads each revocation at its
// next poll.
func TestRevocationCommands(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t)
	cfgPath, port := writeConfig(t, t.TempDir(), fmt.Sprintf("upstream: %q\n", up.URL))
	s := startSidecar(t, cfgPath, port, e2eSecret)
	annCookie, annJWT := signUp(t, s, "ann@example.com", "correct-horse-battery")
	_, bobJWT := signUp(t, s, "bob@example.com", "correct-horse-battery")
	signIn := func(email string) (int, string) {
		res, body := s.do(t, "POST", "/api/auth/sign-in/email", fmt.Sprintf(`{"email":%q,"password":"correct-horse-battery"}`, email))
		return res.StatusCode, jsonCode(body)
	}

	// users revoke: every JWT and session of ann ends; bob's go on; a new
	// sign-in at once (the same second) works.
	out := mustCLI(t, "", "", argv(cfgPath, "users revoke", "Ann@example.com")...)
	if !strings.Contains(out, "revoked every JWT of ann@example.com") || !strings.Contains(out, "ended its 1 session") {
		t.Errorf("users revoke: got %q", out)
	}
	took := refusedWithin(t, s, annJWT, 401, 3*time.Second, "ann's JWT after users revoke")
	t.Logf("users revoke refused ann's JWT on the running sidecar after %v", took)
	if got := getJWTOrEmpty(t, s, annCookie); got != "" {
		t.Error("ann's session survived users revoke")
	}
	if got := status(t, s, "/api/tasks", bobJWT); got != 200 {
		t.Errorf("bob's JWT after ann's revoke: got %d, want 200", got)
	}
	if code, _ := signIn("ann@example.com"); code != 200 {
		t.Fatalf("sign-in right after users revoke: got %d", code)
	}
	c, _ := s.do(t, "POST", "/api/auth/sign-in/email", `{"email":"ann@example.com","password":"correct-horse-battery"}`)
	fresh := getJWT(t, s, c.Cookies()[0].Name+"="+c.Cookies()[0].Value)
	if got := status(t, s, "/api/tasks", fresh); got != 200 {
		t.Errorf("a JWT minted after users revoke: got %d, want 200", got)
	}

	// users ban: sign-in 403 BANNED_USER, the JWT refused; unban lets the
	// user sign in again, the old JWT stays refused.
	out = mustCLI(t, "", "", argv(cfgPath, "users ban", "-reason", "spam", "-until", "72h", "ann@example.com")...)
	if !strings.Contains(out, "banned ann@example.com") || !strings.Contains(out, "403 BANNED_USER") {
		t.Errorf("users ban: got %q", out)
	}
	refusedWithin(t, s, fresh, 401, 3*time.Second, "ann's JWT after users ban")
	if code, errCode := signIn("ann@example.com"); code != 403 || errCode != "BANNED_USER" {
		t.Errorf("banned sign-in: got %d %s, want 403 BANNED_USER", code, errCode)
	}
	if out := mustCLI(t, "", "", argv(cfgPath, "users unban", "ann@example.com")...); !strings.Contains(out, "unbanned ann@example.com") {
		t.Errorf("users unban: got %q", out)
	}
	if out := mustCLI(t, "", "", argv(cfgPath, "users unban", "ann@example.com")...); !strings.Contains(out, "was not banned") {
		t.Errorf("users unban twice: got %q", out)
	}
	if code, _ := signIn("ann@example.com"); code != 200 {
		t.Errorf("sign-in after unban: got %d, want 200", code)
	}
	if got := status(t, s, "/api/tasks", fresh); got != 401 {
		t.Errorf("the JWT revoked by the ban, after unban: got %d, want 401", got)
	}

	// keys revoke-all: everyone's JWT goes; cookie sessions stay and mint
	// JWTs that work.
	bobCookie, _ := signUp(t, s, "carl@example.com", "correct-horse-battery")
	carlJWT := getJWT(t, s, bobCookie)
	if out := mustCLI(t, "", "", argv(cfgPath, "keys revoke-all")...); !strings.Contains(out, "revoked every JWT issued up to") {
		t.Errorf("keys revoke-all: got %q", out)
	}
	refusedWithin(t, s, bobJWT, 401, 3*time.Second, "bob's JWT after keys revoke-all")
	if got := status(t, s, "/api/tasks", carlJWT); got != 401 {
		t.Errorf("carl's JWT after keys revoke-all: got %d, want 401", got)
	}
	if got := status(t, s, "/api/tasks", getJWT(t, s, bobCookie)); got != 200 {
		t.Errorf("a JWT minted from a kept session after keys revoke-all: got %d, want 200", got)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{argv(cfgPath, "users revoke", "nobody@example.com"), "no user with email nobody@example.com"},
		{argv(cfgPath, "users ban", "-until", "-1h", "ann@example.com"), "-until: must not be negative"},
		{argv(cfgPath, "users ban", "-reason", "a\nb", "ann@example.com"), "-reason: one line"},
		{argv(cfgPath, "users ban"), "takes EMAIL"},
	} {
		_, _, err := cli(t, "", "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if _, _, err := cli(t, "", "", argv(cfgPath, "users ban", "-until", "-1h", "ann@example.com")...); !errors.Is(err, errUsage) {
		t.Errorf("a negative -until: got %v, want a usage error", err)
	}
}

// getJWTOrEmpty is get-session's JWT, or "" when there is no session.
func getJWTOrEmpty(t *testing.T, s *instance, cookie string) string {
	t.Helper()
	res, _ := s.do(t, "GET", "/api/auth/get-session", "", "Cookie", cookie)
	return res.Header.Get("Set-Auth-Jwt")
}
