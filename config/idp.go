package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// IdentityProvider is one entry of identity_providers: an OpenID Connect
// provider, Google or GitHub that users may sign in with
// (POST /api/auth/sign-in/social {"provider": ID}). The names are pinned:
// other tools write them.
type IdentityProvider struct {
	// ID is the providerId on the wire: sign-in/social's "provider", the
	// callback /api/auth/callback/<id> registered at the provider, and
	// account.provider_id. Required; [a-z0-9_-], at most 64 bytes, unique,
	// and not "credential" (the password account's).
	ID string `yaml:"id"`
	// Kind is "oidc" (any OpenID Connect provider with discovery: Okta,
	// Entra ID, Keycloak, Auth0, ...), "google" or "github". Required.
	Kind ProviderKind `yaml:"kind"`
	// Issuer is the provider's issuer URL: discovery is read at
	// <issuer>/.well-known/openid-configuration, and id tokens must carry
	// it as iss. Required for oidc; google: default
	// "https://accounts.google.com"; github: must be empty.
	Issuer string `yaml:"issuer"`
	// ClientID is the client registered at the provider. Required.
	ClientID string `yaml:"client_id"`
	// ClientSecretEnv names the environment variable holding the client
	// secret, so the secret is never in the file. Required for google and
	// github; for oidc, empty means a public client (PKCE only).
	ClientSecretEnv string `yaml:"client_secret_env"`
	// Scopes replace the kind's default: oidc and google "openid email
	// profile", github "read:user user:email" (plus "read:org" when
	// AllowedOrganizations is set). Empty: the default.
	Scopes []string `yaml:"scopes"`
	// AllowedEmailDomains, when not empty, admits only users whose verified
	// email is in one of these domains (compared case-insensitively).
	// Empty: any domain.
	AllowedEmailDomains []string `yaml:"allowed_email_domains"`
	// RequiredClaims admits only users whose id token (or userinfo) has
	// each claim with the value given, or with any of the values of a list;
	// a claim that is itself a list (groups) matches when any element does.
	// oidc and google only. Empty: no claim is required.
	RequiredClaims map[string]ClaimValues `yaml:"required_claims"`
	// AllowedOrganizations admits only members of one of these GitHub
	// organizations (and adds the read:org scope). github only. Empty: any
	// GitHub user.
	AllowedOrganizations []string `yaml:"allowed_organizations"`
	// SignUp lets a first sign-in create the user. Default true; false:
	// only users who already exist (or have this provider linked) may sign
	// in with it.
	SignUp *bool `yaml:"sign_up"`
	// LinkByEmail links a first sign-in to an existing user with the same
	// email, but only when the provider says the email is verified and the
	// local user's email is verified too. Default true; false: such a
	// sign-in is refused (account_not_linked).
	LinkByEmail *bool `yaml:"link_by_email"`
	// TrustUnverifiedEmail, for an oidc provider that never says whether
	// an address is verified (no email_verified claim), lets its users
	// sign up all the same. Their address is stored unverified and
	// unclaimed: it reserves nothing (a password sign-up with it makes
	// another user), is never mailed, and links to no existing user. An
	// explicit link-social from a verified user with the same address is
	// allowed. Default false: an identity whose email is not verified is
	// refused (email_not_verified), nothing stored. google and github say
	// it always: setting it for them is an error.
	TrustUnverifiedEmail bool `yaml:"trust_unverified_email"`
	// Endpoints override where the provider is reached. Zero: discovery
	// (oidc) or the kind's documented endpoints (google, github).
	Endpoints IdentityEndpoints `yaml:"endpoints"`
}

// IdentityEndpoints override a provider's endpoints: an internal hostname
// for the token endpoint, GitHub Enterprise, tests. Each is an absolute
// https URL (http only to a loopback address). Empty: not overridden.
type IdentityEndpoints struct {
	// Authorization is where the browser is sent to sign in.
	Authorization string `yaml:"authorization"`
	// Token is where the code is exchanged (and tokens refreshed).
	Token string `yaml:"token"`
	// Userinfo is the OpenID Connect userinfo endpoint. oidc and google.
	Userinfo string `yaml:"userinfo"`
	// JWKS is where the id tokens' signing keys are read. oidc and google.
	JWKS string `yaml:"jwks"`
	// API is GitHub's REST API root (https://api.github.com;
	// https://github.example.com/api/v3 for GitHub Enterprise). github only.
	API string `yaml:"api"`
}

// SignUpAllowed is SignUp with its default.
func (p IdentityProvider) SignUpAllowed() bool { return p.SignUp == nil || *p.SignUp }

// LinksByEmail is LinkByEmail with its default.
func (p IdentityProvider) LinksByEmail() bool { return p.LinkByEmail == nil || *p.LinkByEmail }

// ProviderKind is what an identity provider is: [KindOIDC], [KindGoogle]
// or [KindGitHub].
type ProviderKind string

const (
	// KindOIDC is any OpenID Connect provider with discovery.
	KindOIDC ProviderKind = "oidc"
	// KindGoogle is Google's OpenID Connect endpoints, without discovery.
	KindGoogle ProviderKind = "google"
	// KindGitHub is GitHub's (or GitHub Enterprise's) OAuth apps: no
	// id token; the user and emails come from its REST API.
	KindGitHub ProviderKind = "github"
)

// GoogleIssuer is the issuer of a google provider that names none.
const GoogleIssuer = "https://accounts.google.com"

// IssuerURL is Issuer with the kind's default.
func (p IdentityProvider) IssuerURL() string {
	if p.Kind == KindGoogle && p.Issuer == "" {
		return GoogleIssuer
	}
	return p.Issuer
}

// ClaimValues is a required claim's accepted values: one scalar or a list
// of them in the file, each kept as its text ("staff", "true", "42").
type ClaimValues []string

// UnmarshalYAML reads a scalar or a list of scalars.
func (c *ClaimValues) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return nodeError(n, "want a value or a list of values, got nothing")
		}
		*c = ClaimValues{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(ClaimValues, 0, len(n.Content))
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode || item.ShortTag() == "!!null" {
				return nodeError(item, "want a value, got %s", describeNode(item))
			}
			out = append(out, item.Value)
		}
		*c = out
		return nil
	}
	return nodeError(n, "want a value or a list of values, got %s", describeNode(n))
}

var (
	providerIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	domainRE     = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	githubOrgRE  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,38})$`)
)

// identityProviders checks identity_providers: each entry on its own and
// the ids together.
func (p *problems) identityProviders(c Config) {
	if c.Verifier() && len(c.IdentityProviders) > 0 {
		p.addRelated("identity_providers", "mode", "is only for mode full: a verifier serves no /api/auth/*")
	}
	ids := make([]string, len(c.IdentityProviders))
	for i, ip := range c.IdentityProviders {
		ids[i] = ip.ID
		p.identityProvider("identity_providers["+strconv.Itoa(i)+"]", ip)
	}
	p.list("identity_providers[*].id", ids, checkProviderID)
}

func checkProviderID(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("is required: the name on the wire, like corp (callback /api/auth/callback/corp)")
	case s == "credential":
		return fmt.Errorf(`"credential" is the password account's provider id; choose another`)
	case !providerIDRE.MatchString(s):
		return fmt.Errorf("%q: want lowercase letters, digits, - and _, at most 64 bytes", s)
	}
	return nil
}

func (p *problems) identityProvider(at string, ip IdentityProvider) {
	oneOf(p, at+".kind", ip.Kind, KindOIDC, KindGoogle, KindGitHub)
	switch ip.Kind {
	case KindOIDC:
		if ip.Issuer == "" {
			p.add(at+".issuer", "is required for kind oidc: the provider's issuer URL, like https://idp.example.com (discovery at <issuer>/.well-known/openid-configuration)")
		} else {
			p.check(at+".issuer", checkProviderURL(ip.Issuer))
		}
	case KindGoogle:
		if ip.Issuer != "" {
			p.check(at+".issuer", checkProviderURL(ip.Issuer))
		}
	case KindGitHub:
		if ip.Issuer != "" {
			p.add(at+".issuer", "is not used by kind github (it has no OpenID issuer): remove it, or set endpoints for GitHub Enterprise")
		}
	}
	if ip.ClientID == "" {
		p.add(at+".client_id", "is required: the client id registered at the provider")
	} else if strings.ContainsAny(ip.ClientID, " \t\r\n") {
		p.add(at+".client_id", "must not contain whitespace, got %q", ip.ClientID)
	}
	switch {
	case ip.ClientSecretEnv != "":
		p.check(at+".client_secret_env", checkEnvName(ip.ClientSecretEnv))
	case ip.Kind == KindGoogle || ip.Kind == KindGitHub:
		p.add(at+".client_secret_env", "is required for kind %s: the environment variable holding the client secret", ip.Kind)
	}
	p.list(at+".scopes", ip.Scopes, checkScope)
	p.list(at+".allowed_email_domains", ip.AllowedEmailDomains, checkEmailDomain)
	if len(ip.RequiredClaims) > 0 && ip.Kind == KindGitHub {
		p.add(at+".required_claims", "is only for kinds oidc and google: GitHub has no id token (use allowed_organizations)")
	}
	for name, vals := range ip.RequiredClaims {
		switch {
		case strings.TrimSpace(name) == "":
			p.add(at+".required_claims", "a claim name must not be empty")
		case len(vals) == 0:
			p.add(at+".required_claims."+name, "must list at least one value")
		}
	}
	if len(ip.AllowedOrganizations) > 0 && ip.Kind != KindGitHub {
		p.add(at+".allowed_organizations", "is only for kind github (use required_claims with your provider's groups claim)")
	}
	p.list(at+".allowed_organizations", ip.AllowedOrganizations, checkGitHubOrg)
	if ip.TrustUnverifiedEmail && ip.Kind != KindOIDC {
		p.add(at+".trust_unverified_email", "is only for kind oidc: %s always says whether an address is verified, and an unverified one must not sign in", ip.Kind)
	}
	p.identityEndpoints(at+".endpoints", ip.Kind, ip.Endpoints)
}

func (p *problems) identityEndpoints(at string, kind ProviderKind, e IdentityEndpoints) {
	for _, ep := range []struct {
		name, value string
		kinds       string // the kinds it applies to
	}{
		{"authorization", e.Authorization, "oidc google github"},
		{"token", e.Token, "oidc google github"},
		{"userinfo", e.Userinfo, "oidc google"},
		{"jwks", e.JWKS, "oidc google"},
		{"api", e.API, "github"},
	} {
		if ep.value == "" {
			continue
		}
		if kind != "" && !strings.Contains(ep.kinds, string(kind)) {
			p.add(at+"."+ep.name, "is not used by kind %s", kind)
			continue
		}
		p.check(at+"."+ep.name, checkProviderURL(ep.value))
	}
}

// checkProviderURL wants https, or http only to a loopback address: codes,
// tokens and client secrets travel to these URLs.
func checkProviderURL(s string) error {
	return checkSecureURL(s, "codes, tokens and the client secret travel here")
}

func checkScope(s string) error {
	if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
		return fmt.Errorf("%q is not one scope: no spaces, quotes or backslashes", s)
	}
	return nil
}

func checkEmailDomain(s string) error {
	if strings.Contains(s, "@") {
		return fmt.Errorf("%q: want a domain like example.com, without the @", s)
	}
	if !domainRE.MatchString(strings.ToLower(s)) {
		return fmt.Errorf("%q is not a domain name like example.com", s)
	}
	return nil
}

func checkGitHubOrg(s string) error {
	if !githubOrgRE.MatchString(s) {
		return fmt.Errorf("%q is not a GitHub organization login", s)
	}
	return nil
}

// LoadProviderSecrets reads each identity provider's client secret from
// the environment variable its client_secret_env names, keyed by id. A
// provider without client_secret_env gets none. Messages never hold a
// value.
func (c Config) LoadProviderSecrets(getenv func(string) string) (map[string]Secret, error) {
	out := make(map[string]Secret, len(c.IdentityProviders))
	var errs []string
	for i, ip := range c.IdentityProviders {
		if ip.ClientSecretEnv == "" {
			continue
		}
		v := getenv(ip.ClientSecretEnv)
		if v == "" {
			errs = append(errs, fmt.Sprintf("identity_providers[%d].client_secret_env: $%s is not set: export the client secret of provider %q", i, ip.ClientSecretEnv, ip.ID))
			continue
		}
		out[ip.ID] = NewSecret(v)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
}
