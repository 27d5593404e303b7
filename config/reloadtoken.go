package config

import "fmt"

// minReloadTokenBytes: a token short enough to guess would be a lock
// with the key under the mat.
const minReloadTokenBytes = 16

// LoadReloadToken reads the bearer token POST /-/reload requires from the
// environment variable Metrics.ReloadTokenEnv names, through getenv. With
// no name it returns the empty Secret: no token is required. A name whose
// variable is unset or shorter than 16 bytes is an error, so a typo does
// not leave the lever open.
func (c Config) LoadReloadToken(getenv func(string) string) (Secret, error) {
	name := c.Metrics.ReloadTokenEnv
	if name == "" {
		return Secret{}, nil
	}
	v := getenv(name)
	switch {
	case v == "":
		return Secret{}, fmt.Errorf("metrics.reload_token_env: $%s is not set: export a random token (e.g. openssl rand -base64 32), or remove the key to require none", name)
	case len(v) < minReloadTokenBytes:
		return Secret{}, fmt.Errorf("metrics.reload_token_env: $%s is too short: %d bytes, want at least %d (e.g. openssl rand -base64 32)", name, len(v), minReloadTokenBytes)
	}
	return NewSecret(v), nil
}
