package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"gopkg.in/yaml.v3"
)

// minSecretBytes is the shortest secret accepted: 256 bits, the key size of
// the cipher that encrypts signing keys at rest.
const minSecretBytes = 32

const redacted = "[redacted]"

// Secret holds the AUTH_SECRET value. Every way of printing or encoding it
// (fmt with any verb, log/slog, encoding/json, encoding.TextMarshaler, yaml)
// yields "[redacted]"; only [Secret.Bytes] returns the value. The zero Secret
// is empty.
type Secret struct {
	// A pointer, so that a Secret inside another struct printed with %+v
	// (where fmt cannot call Secret's methods on an unexported field) shows
	// an address rather than the value.
	p *string
}

// NewSecret wraps s. It does not check s; [Config.LoadSecret] does.
func NewSecret(s string) Secret { return Secret{p: &s} }

// Bytes returns a copy of the secret's value.
func (s Secret) Bytes() []byte {
	if s.p == nil {
		return nil
	}
	return []byte(*s.p)
}

// String returns "[redacted]".
func (Secret) String() string { return redacted }

// GoString returns "[redacted]", for %#v.
func (Secret) GoString() string { return redacted }

// Format writes "[redacted]" for every verb, including those such as %d and
// %x that would otherwise print the struct's contents.
func (Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, redacted) }

// LogValue returns "[redacted]" for log/slog.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON returns the JSON string "[redacted]".
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText returns "[redacted]".
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// MarshalYAML returns "[redacted]".
func (Secret) MarshalYAML() (any, error) { return redacted, nil }

// LoadSecret reads the secret from the environment variable named by
// c.Auth.SecretEnv, using getenv (os.Getenv in main, a map in tests). It
// refuses a missing, short or well-known placeholder value, because the
// secret encrypts the signing keys: a guessable one lets anyone who reads the
// database mint tokens for every user. Messages never contain the value.
func (c Config) LoadSecret(getenv func(string) string) (Secret, error) {
	name := c.Auth.SecretEnv
	if name == "" {
		return Secret{}, errors.New("auth.secret_env is empty: name the environment variable that holds the secret")
	}
	v := getenv(name)
	switch {
	case v == "":
		return Secret{}, fmt.Errorf("%s is not set: export a random secret of at least %d bytes (e.g. openssl rand -base64 32)", name, minSecretBytes)
	case isPlaceholder(v):
		return Secret{}, fmt.Errorf("%s is a well-known placeholder or a repeated pattern: export a random secret of at least %d bytes instead (e.g. openssl rand -base64 32)", name, minSecretBytes)
	case len(v) < minSecretBytes:
		return Secret{}, fmt.Errorf("%s is too short: %d bytes, want at least %d (e.g. openssl rand -base64 32)", name, len(v), minSecretBytes)
	}
	return NewSecret(v), nil
}

// placeholders are values copied from examples and templates, compared
// case-insensitively. A value that merely contains one of placeholderParts is
// refused too, since padding a placeholder to 32 bytes does not make it secret.
var (
	placeholders = []string{
		"secret", "password", "changeit", "default", "test", "example",
		"better-auth-secret-12345678901234567890",
	}
	placeholderParts = []string{
		"changeme", "change-me", "change_me", "replaceme", "replace-me", "replace_me",
		"your-secret", "your_secret", "yoursecret", "better-auth-secret", "placeholder",
	}
)

func isPlaceholder(v string) bool {
	lv := strings.ToLower(v)
	for _, p := range placeholders {
		if lv == p {
			return true
		}
	}
	for _, p := range placeholderParts {
		if strings.Contains(lv, p) {
			return true
		}
	}
	return isRepeated(lv)
}

// isRepeated reports whether v is a short unit (up to 8 bytes) repeated, like
// "aaaa…", "abcabc…" or "secretsecret…": long enough, but with the entropy of
// the unit alone.
func isRepeated(v string) bool {
	for unit := 1; unit <= 8 && unit*2 <= len(v); unit++ {
		if strings.Repeat(v[:unit], len(v)/unit+1)[:len(v)] == v {
			return true
		}
	}
	return false
}

// SecretHint is for a config file that does not load: it reads, leniently,
// what checking the secret needs anyway, so "check" can report a missing
// secret in the same run as the file's errors. env is the file's
// auth.secret_env, or the default when the file does not set it or cannot
// be parsed at all; empty when the file sets a name that is not valid (that
// is one of the file's errors, and no variable can be checked). needed
// follows [Config.NeedsSecret] with the file's mode and routes.cookie_only.
func SecretHint(data []byte) (env string, needed bool) {
	def := Default()
	f := struct {
		Mode Mode `yaml:"mode"`
		Auth struct {
			SecretEnv *string `yaml:"secret_env"`
		} `yaml:"auth"`
		Routes struct {
			CookieOnly []string `yaml:"cookie_only"`
		} `yaml:"routes"`
	}{Mode: def.Mode}
	// Not strict: unknown keys and wrong values elsewhere are the errors
	// already reported; whatever of these three decodes is used.
	_ = yaml.Unmarshal(data, &f)
	c := def
	c.Mode = f.Mode
	if f.Auth.SecretEnv != nil {
		c.Auth.SecretEnv = *f.Auth.SecretEnv
	}
	if c.Verifier() {
		c.Routes.CookieOnly = f.Routes.CookieOnly
	}
	if checkEnvName(c.Auth.SecretEnv) != nil {
		return "", c.NeedsSecret()
	}
	return c.Auth.SecretEnv, c.NeedsSecret()
}
