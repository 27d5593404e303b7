package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestMigrationValidate: lazy migration is off unless url is set; set,
// its secret's name and timeout are checked, and passwords go over https
// or to this machine only.
func TestMigrationValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*LegacySignin)
		want   string // "" means valid
	}{
		{"off: nothing else is read", func(l *LegacySignin) { l.SecretEnv, l.Timeout = "", 0 }, ""},
		{"https", func(l *LegacySignin) { l.URL = "https://legacy.example.com/api/signin" }, ""},
		{"http to loopback", func(l *LegacySignin) { l.URL = "http://127.0.0.1:3000/api/signin" }, ""},
		{"http to localhost", func(l *LegacySignin) { l.URL = "http://localhost:3000/api/signin" }, ""},
		{"http to a private address", func(l *LegacySignin) { l.URL = "http://10.0.0.5/api/signin" },
			`migration.legacy_signin.url: "http://10.0.0.5/api/signin": plain http is only allowed to a loopback address (passwords travel here); use https`},
		{"userinfo", func(l *LegacySignin) { l.URL = "https://app:pw@legacy.example.com/api/signin" },
			`migration.legacy_signin.url: must not contain userinfo (user@ or user:password@), got "https://app:pw@legacy.example.com/api/signin"`},
		{"no secret name", func(l *LegacySignin) { l.URL, l.SecretEnv = "https://legacy.example.com/", "" },
			`migration.legacy_signin.secret_env: must be an environment variable name like AUTH_SECRET, got ""`},
		{"timeout too short", func(l *LegacySignin) { l.URL, l.Timeout = "https://legacy.example.com/", Duration(50*time.Millisecond) },
			`migration.legacy_signin.timeout: must be between 100ms and 4s (a sign-in is answered within 5s), got 50ms`},
		{"timeout at the top", func(l *LegacySignin) { l.URL, l.Timeout = "https://legacy.example.com/", Duration(4*time.Second) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c.Migration.LegacySignin)
			got := ""
			if err := c.Validate(); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestLoadLegacySecret: the secret is read only when lazy migration is
// on, must be set and long enough, and no message shows it.
func TestLoadLegacySecret(t *testing.T) {
	tests := []struct {
		name, url, value string
		want             string // the secret, or the error
	}{
		{"off", "", "", ""},
		{"set", "https://legacy.example.com/", "0123456789abcdef-secret", "0123456789abcdef-secret"},
		{"unset", "https://legacy.example.com/", "", "migration.legacy_signin.secret_env: $LEGACY_SIGNIN_SECRET is not set: export the secret the legacy application expects (e.g. openssl rand -base64 32)"},
		{"short", "https://legacy.example.com/", "xyzzy", "migration.legacy_signin.secret_env: $LEGACY_SIGNIN_SECRET is too short: 5 bytes, want at least 16 (e.g. openssl rand -base64 32)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Migration.LegacySignin.URL = tt.url
			s, err := c.LoadLegacySecret(func(k string) string {
				if k == "LEGACY_SIGNIN_SECRET" {
					return tt.value
				}
				return ""
			})
			got := string(s.Bytes())
			if err != nil {
				got = err.Error()
				if tt.value != "" && strings.Contains(got, tt.value) {
					t.Errorf("the error shows the value: %s", got)
				}
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestMigrationReloadable: lazy migration is turned on, changed and
// turned off by a reload.
func TestMigrationReloadable(t *testing.T) {
	old, next := Default(), Default()
	next.Migration.LegacySignin = LegacySignin{URL: "https://legacy.example.com/", SecretEnv: "OTHER_SECRET", Timeout: Duration(time.Second)}
	if keys := RestartKeys(old, next); len(keys) != 0 {
		t.Errorf("on: got restart keys %v, want none", keys)
	}
	if keys := RestartKeys(next, old); len(keys) != 0 {
		t.Errorf("off: got restart keys %v, want none", keys)
	}
}

// TestLoadBetterAuthSecret: Better Auth's secret is read only when
// auth.better_auth_secret_env names it, must then be set, and no message
// shows it; the keys are restart keys (the cookies accepted are shaped at
// start).
func TestLoadBetterAuthSecret(t *testing.T) {
	tests := []struct {
		name, env, value string
		want             string // the secret, or the error
	}{
		{"off", "", "ignored", ""},
		{"set", "BETTER_AUTH_SECRET", "short-is-fine", "short-is-fine"},
		{"unset", "BETTER_AUTH_SECRET", "", "auth.better_auth_secret_env: $BETTER_AUTH_SECRET is not set: export the BETTER_AUTH_SECRET the Better Auth application ran with, or remove the key once its sessions have expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Auth.BetterAuthSecretEnv = tt.env
			s, err := c.LoadBetterAuthSecret(func(k string) string {
				if k == "BETTER_AUTH_SECRET" || tt.env == "" {
					return tt.value
				}
				return ""
			})
			got := string(s.Bytes())
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	old, next := Default(), Default()
	next.Auth.BetterAuthSecretEnv, next.Auth.BetterAuthCookie = "BETTER_AUTH_SECRET", "app.session_token"
	if keys := RestartKeys(old, next); !reflect.DeepEqual(keys, []string{"auth.better_auth_secret_env", "auth.better_auth_cookie"}) {
		t.Errorf("restart keys: got %v", keys)
	}
}
