package sidecar

import (
	"net/http"
	"net/url"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/legacy"
)

// legacySignIn maps migration.legacy_signin onto package legacy, with
// the secret read from the environment variable it names, at start and
// on each reload; nil when lazy migration is off. transport is the
// stack's, so a reload does not leave a pool of connections behind.
func legacySignIn(cfg config.Config, getenv func(string) string, transport http.RoundTripper) (issuer.LegacySignIn, error) {
	l := cfg.Migration.LegacySignin
	if l.URL == "" || cfg.Verifier() {
		return nil, nil
	}
	secret, err := cfg.LoadLegacySecret(getenv)
	if err != nil {
		return nil, err
	}
	return legacy.New(legacy.Options{URL: l.URL, Secret: string(secret.Bytes()), Timeout: l.Timeout.D(), Transport: transport})
}

// origin is a URL's scheme and host: what logs show of the legacy
// endpoint (its path is the operator's, and may hold a token).
func origin(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
