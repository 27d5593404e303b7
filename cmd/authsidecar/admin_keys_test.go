package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/sqlstore"
)

const otherSecret = "another-secret-0123456789abcdefghijklmnop"

// keyRows parses "keys list" into kid -> [created, expires, status].
func keyRows(t *testing.T, out string) map[string][]string {
	t.Helper()
	rows := table(out)
	if len(rows) == 0 || strings.Join(rows[0], " ") != "KID CREATED EXPIRES STATUS" {
		t.Fatalf("keys list: got %q, want a KID CREATED EXPIRES STATUS table", out)
	}
	m := map[string][]string{}
	for _, r := range rows[1:] {
		if len(r) != 4 {
			continue // the footer line
		}
		m[r[0]] = r[1:]
	}
	return m
}

var newKeyRE = regexp.MustCompile(`(?:new signing key|created signing key) ([A-Za-z0-9]+)`)

func newKID(t *testing.T, out string) string {
	t.Helper()
	m := newKeyRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("keys rotate: got %q, want the new kid", out)
	}
	return m[1]
}

func TestKeysListAndRotate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath, _ := writeConfig(t, dir, "")
	// The database as serve creates it, before its first key.
	db, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(dir, "auth.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	if out := mustCLI(t, e2eSecret, "", argv(cfgPath, "keys list")...); !strings.Contains(out, "no signing keys yet") {
		t.Errorf("empty database: got %q, want no signing keys yet", out)
	}
	out := mustCLI(t, e2eSecret, "", argv(cfgPath, "keys rotate")...)
	first := newKID(t, out)
	if strings.Contains(out, "retired") {
		t.Errorf("first rotate: got %q, want one new key and nothing retired", out)
	}

	keys := keyRows(t, mustCLI(t, e2eSecret, "", argv(cfgPath, "keys list")...))
	if got := keys[first]; len(keys) != 1 || got == nil || got[1] != "-" || got[2] != "usable: signs new JWTs" {
		t.Fatalf("keys list: got %v, want %s alone, no expiry, usable and signing", keys, first)
	}

	// Another secret: the key is listed as unusable, with why.
	keys = keyRows(t, mustCLI(t, otherSecret, "", argv(cfgPath, "keys list")...))
	if got := keys[first]; got == nil || got[2] != "unusable: private key cannot be decrypted with the current AUTH_SECRET" {
		t.Errorf("keys list under another secret: got %v, want %s unusable because it does not decrypt", keys, first)
	}
	// ... and rotating under it is refused rather than adding a key the
	// sidecar could not open.
	if _, _, err := cli(t, otherSecret, "", argv(cfgPath, "keys rotate")...); err == nil || !strings.Contains(err.Error(), "none of the 1 stored keys is usable with $AUTH_SECRET") {
		t.Errorf("keys rotate under another secret: got %v, want a refusal", err)
	}
	if _, _, err := cli(t, "", "", argv(cfgPath, "keys list")...); err == nil || !strings.Contains(err.Error(), "AUTH_SECRET") {
		t.Errorf("keys list without the secret: got %v, want an error naming AUTH_SECRET", err)
	}

	out = mustCLI(t, e2eSecret, "", argv(cfgPath, "keys rotate")...)
	second := newKID(t, out)
	for _, want := range []string{"new signing key " + second + ": in JWKS now, signs from ", "published longer than keys.cooldown = 30s",
		"retiring " + first + ": signs until ", "stays in JWKS until", "needs no restart"} {
		if !strings.Contains(out, want) {
			t.Errorf("keys rotate: got %q, want %q", out, want)
		}
	}
	keys = keyRows(t, mustCLI(t, e2eSecret, "", argv(cfgPath, "keys list")...))
	if len(keys) != 2 {
		t.Fatalf("keys list after rotate: got %v, want two keys", keys)
	}
	// The new key is published ahead of use; the old one signs until then
	// (its expires is set) and verifies for jwt_ttl more.
	if got := keys[second]; got == nil || got[1] != "-" || !strings.HasPrefix(got[2], "usable: published ahead of use, signs from ") {
		t.Errorf("new key: got %v, want published ahead of use", got)
	}
	if got := keys[first]; got == nil || got[1] == "-" || got[2] != "usable: signs new JWTs" {
		t.Errorf("old key: got %v, want signing until the new one may, its expiry set", got)
	}
}

// TestKeysRotateRunning rotates the key of a running sidecar: the new key
// is in the JWKS at once, get-session signs with the old one until the new
// one has been published longer than keys.cooldown (1ms here, plus the
// issuer's 5s margin), then with the new one; JWTs signed before still
// verify.
func TestKeysRotateRunning(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t)
	cfgPath, port := writeConfig(t, t.TempDir(), fmt.Sprintf("upstream: %q\nkeys: { cooldown: 1ms }\n", up.URL))
	s := startSidecar(t, cfgPath, port, e2eSecret)
	cookie, before := signUp(t, s, "ann@example.com", "correct-horse-battery")
	oldKID := kidOf(t, before)

	out := mustCLI(t, e2eSecret, "", argv(cfgPath, "keys rotate")...)
	kid := newKID(t, out)
	if kid == oldKID || !strings.Contains(out, "retiring "+oldKID) {
		t.Fatalf("keys rotate: got %q, want a new kid and %s retiring", out, oldKID)
	}
	_, jwks := s.do(t, "GET", "/api/auth/jwks", "")
	if !strings.Contains(string(jwks), oldKID) || !strings.Contains(string(jwks), kid) {
		t.Errorf("JWKS right after the rotation: got %s, want both %s and %s", jwks, oldKID, kid)
	}
	if got := kidOf(t, getJWT(t, s, cookie)); got != oldKID {
		t.Errorf("get-session right after the rotation: got kid %s, want the old %s until the new one is published long enough", got, oldKID)
	}
	var after string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		after = getJWT(t, s, cookie)
		if kidOf(t, after) == kid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("get-session never signed with the new key %s", kid)
		}
	}
	res, body := s.do(t, "GET", "/api/tasks", "", "Authorization", "Bearer "+after)
	if res.StatusCode != 200 || !strings.Contains(string(body), `"path":"/api/tasks"`) {
		t.Errorf("JWT from after the rotation: got %d %s, want 200 from the upstream", res.StatusCode, body)
	}
	if got := status(t, s, "/api/tasks", before); got != 200 {
		t.Errorf("JWT from before the rotation: got %d, want 200", got)
	}
}
