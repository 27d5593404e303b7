package config

import (
	"fmt"
	"time"
)

// Migration configures how users of a legacy application come to the
// sidecar (docs/migration.md).
type Migration struct {
	// LegacySignin is lazy migration: users move on their first sign-in.
	LegacySignin LegacySignin `yaml:"legacy_signin"`
}

// LegacySignin asks a legacy application about a sign-in for an address
// the sidecar does not know (Auth0's automatic migration): it POSTs
// {"email","password"} to URL with "Authorization: Bearer <secret>"; a
// 200 with {"id","email","name","email_verified","roles"} creates the
// user with that id, the password hashed the sidecar's way. Reloadable:
// turning it off changes nothing for users already migrated. Full mode
// only.
type LegacySignin struct {
	// URL is the legacy application's sign-in endpoint: https, or http
	// to a loopback address only (passwords travel to it). Default empty:
	// lazy migration off.
	URL string `yaml:"url"`
	// SecretEnv names the environment variable holding the bearer secret
	// sent with each call, at least 16 bytes, so the legacy application
	// answers the sidecar only. Default "LEGACY_SIGNIN_SECRET"; read only
	// when URL is set.
	SecretEnv string `yaml:"secret_env"`
	// Timeout bounds one call, body included; past it the sign-in is
	// answered 503 LEGACY_SIGNIN_UNAVAILABLE. Default 3s. Between 100ms
	// and 4s: the whole sign-in is answered within 5s.
	Timeout Duration `yaml:"timeout"`
}

// Legacy sign-in timeout bounds: below 100ms no application answers;
// above 4s the call would eat the 5s a sign-in is given, the store's
// share included.
const (
	minLegacyTimeout = Duration(100 * time.Millisecond)
	maxLegacyTimeout = Duration(4 * time.Second)
)

// minLegacySecretBytes: the secret guards an endpoint that checks
// passwords; short enough to guess, it would make that endpoint anyone's
// password oracle.
const minLegacySecretBytes = 16

func (p *problems) migration(c Config) {
	l := c.Migration.LegacySignin
	if l.URL == "" {
		return
	}
	if c.Verifier() {
		p.addRelated("migration.legacy_signin.url", "mode", "is only for mode full: a verifier serves no /api/auth/*")
	}
	p.check("migration.legacy_signin.url", checkLegacyURL(l.URL))
	p.check("migration.legacy_signin.secret_env", checkEnvName(l.SecretEnv))
	if l.Timeout < minLegacyTimeout || l.Timeout > maxLegacyTimeout {
		p.add("migration.legacy_signin.timeout", "must be between %s and %s (a sign-in is answered within 5s), got %s", minLegacyTimeout, maxLegacyTimeout, l.Timeout)
	}
}

// checkLegacyURL wants https, or http only to a loopback address:
// passwords travel to it.
func checkLegacyURL(s string) error {
	return checkSecureURL(s, "passwords travel here")
}

// LoadLegacySecret reads the bearer secret of lazy migration from the
// environment variable Migration.LegacySignin.SecretEnv names, through
// getenv. With no URL it returns the empty Secret. Messages never hold
// the value.
func (c Config) LoadLegacySecret(getenv func(string) string) (Secret, error) {
	l := c.Migration.LegacySignin
	if l.URL == "" {
		return Secret{}, nil
	}
	v := getenv(l.SecretEnv)
	switch {
	case v == "":
		return Secret{}, fmt.Errorf("migration.legacy_signin.secret_env: $%s is not set: export the secret the legacy application expects (e.g. openssl rand -base64 32)", l.SecretEnv)
	case len(v) < minLegacySecretBytes:
		return Secret{}, fmt.Errorf("migration.legacy_signin.secret_env: $%s is too short: %d bytes, want at least %d (e.g. openssl rand -base64 32)", l.SecretEnv, len(v), minLegacySecretBytes)
	}
	return NewSecret(v), nil
}

// LoadBetterAuthSecret reads the BETTER_AUTH_SECRET of an imported Better
// Auth application from the environment variable
// Auth.BetterAuthSecretEnv names, through getenv. With no name it
// returns the empty Secret: no Better Auth cookie is accepted. Its length
// is not checked: it is the secret Better Auth ran with, whatever it was,
// and it only ever verifies. Messages never hold the value.
func (c Config) LoadBetterAuthSecret(getenv func(string) string) (Secret, error) {
	name := c.Auth.BetterAuthSecretEnv
	if name == "" {
		return Secret{}, nil
	}
	v := getenv(name)
	if v == "" {
		return Secret{}, fmt.Errorf("auth.better_auth_secret_env: $%s is not set: export the BETTER_AUTH_SECRET the Better Auth application ran with, or remove the key once its sessions have expired", name)
	}
	return NewSecret(v), nil
}
