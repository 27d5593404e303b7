package sidecar

import (
	"log/slog"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/idp"
)

// ProviderConfigs is providerConfigs, for "authsidecar check".
func ProviderConfigs(cfg config.Config, getenv func(string) string) ([]idp.Config, error) {
	return providerConfigs(cfg, getenv)
}

// providerConfigs maps identity_providers onto package idp, with each
// provider's client secret read from the environment variable it names.
// A missing secret is an error: at start-up the sidecar refuses to start,
// on reload the reload is refused whole.
func providerConfigs(cfg config.Config, getenv func(string) string) ([]idp.Config, error) {
	secrets, err := cfg.LoadProviderSecrets(getenv)
	if err != nil {
		return nil, err
	}
	out := make([]idp.Config, 0, len(cfg.IdentityProviders))
	for _, p := range cfg.IdentityProviders {
		claims := make(map[string][]string, len(p.RequiredClaims))
		for k, v := range p.RequiredClaims {
			claims[k] = []string(v)
		}
		out = append(out, idp.Config{
			ID: p.ID, Kind: string(p.Kind), Issuer: p.IssuerURL(), ClientID: p.ClientID, ClientSecret: string(secrets[p.ID].Bytes()),
			Scopes: p.Scopes, AllowedEmailDomains: p.AllowedEmailDomains, RequiredClaims: claims,
			AllowedOrganizations: p.AllowedOrganizations, SignUp: p.SignUpAllowed(), LinkByEmail: p.LinksByEmail(),
			TrustUnverifiedEmail: p.TrustUnverifiedEmail,
			Endpoints: idp.Endpoints{Authorization: p.Endpoints.Authorization, Token: p.Endpoints.Token,
				Userinfo: p.Endpoints.Userinfo, JWKS: p.Endpoints.JWKS, API: p.Endpoints.API},
		})
	}
	return out, nil
}

// idpOptions are the providers' shared options: the JWKS cache timings
// are verifier mode's (keys.max_age, keys.cooldown), as restart keys.
func idpOptions(cfg config.Config, log *slog.Logger, m *idp.Metrics) idp.Options {
	return idp.Options{
		KeysMaxAge:   cfg.Keys.MaxAge.D(),
		KeysCooldown: cfg.Keys.Cooldown.D(),
		Leeway:       cfg.Auth.Leeway.D(),
		Metrics:      m,
		Logger:       log,
	}
}
