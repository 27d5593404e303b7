package config

import (
	"errors"
	"fmt"
	"net/url"
)

// Verifier reports whether the sidecar only verifies (mode verifier).
func (c Config) Verifier() bool { return c.Mode == ModeVerifier }

// NeedsSecret reports whether AUTH_SECRET is needed: in full mode it seals
// the signing keys and signs cookies; a verifier needs it only to read
// session cookies on cookie-only routes.
func (c Config) NeedsSecret() bool {
	return !c.Verifier() || len(c.Routes.CookieOnly) > 0
}

// JWTIssuer returns the JWT iss and aud: Auth.Issuer when set, else the
// origin of BaseURL (full mode) or of Keys.JWKSURL (verifier mode), which
// is what this sidecar and Better Auth's jwt() plugin put in their tokens.
func (c Config) JWTIssuer() string {
	switch {
	case c.Auth.Issuer != "":
		return c.Auth.Issuer
	case c.Verifier():
		return origin(c.Keys.JWKSURL)
	}
	return c.BaseOrigin()
}

// checkIssuer accepts what can be compared with a token's iss: printable
// ASCII without spaces, bounded.
func checkIssuer(s string) error {
	if len(s) > 512 {
		return fmt.Errorf("must be at most 512 bytes, got %d", len(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return fmt.Errorf("must be printable ASCII without spaces, like https://auth.example.com, got %q", s)
		}
	}
	return nil
}

// origin returns the origin of a URL the way BaseOrigin does.
func origin(raw string) string {
	return Config{BaseURL: raw}.BaseOrigin()
}

// LoadDatabaseURL reads the PostgreSQL URL from the environment variable
// named by Database.URLEnv. It is a Secret: it holds the database password,
// and no message, log line or check output may show it. Drivers other than
// postgres need no URL and get the zero Secret.
func (c Config) LoadDatabaseURL(getenv func(string) string) (Secret, error) {
	if c.Database.Driver != DriverPostgres {
		return Secret{}, nil
	}
	name := c.Database.URLEnv
	v := getenv(name)
	if v == "" {
		return Secret{}, fmt.Errorf("database.url_env: $%s is not set: export the PostgreSQL URL, like postgres://user:password@host:5432/authsidecar?sslmode=verify-full", name)
	}
	u, err := url.Parse(v)
	if err != nil {
		// url.Parse's error quotes the input, password and all.
		return Secret{}, errors.New("database.url_env: $" + name + " is not a URL: want postgres://user:password@host:5432/db")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return Secret{}, fmt.Errorf("database.url_env: $%s must be a postgres:// or postgresql:// URL, got scheme %q", name, u.Scheme)
	}
	return NewSecret(v), nil
}
