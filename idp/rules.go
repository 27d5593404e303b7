package idp

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/authsidecar/authsidecar/issuer"
)

// admit applies the provider's rules to a user: allowed_email_domains
// (the email must be verified and in one of them), required_claims
// (oidc and google) and allowed_organizations (github: orgs is the
// memberships found). A refusal wraps issuer.ErrIdentityRefused and says
// which rule, for the log.
func (b *base) admit(id issuer.Identity, claims map[string]any, orgs []string) error {
	if ds := b.cfg.AllowedEmailDomains; len(ds) > 0 {
		_, domain, _ := strings.Cut(id.Email, "@")
		switch {
		case id.Email == "" || !id.EmailVerified:
			return errorf(issuer.ErrIdentityRefused, "allowed_email_domains: the provider gave no verified email")
		case !slices.ContainsFunc(ds, func(d string) bool { return lower(d) == domain }):
			return errorf(issuer.ErrIdentityRefused, "allowed_email_domains: %q is not allowed", clip(domain))
		}
	}
	for name, want := range b.cfg.RequiredClaims {
		got := claimValues(claims[name])
		if !slices.ContainsFunc(got, func(v string) bool { return slices.Contains(want, v) }) {
			return errorf(issuer.ErrIdentityRefused, "required_claims: %s is not one of %q", clip(name), want)
		}
	}
	if len(b.cfg.AllowedOrganizations) > 0 && len(orgs) == 0 {
		return errorf(issuer.ErrIdentityRefused, "allowed_organizations: a member of none of %q", b.cfg.AllowedOrganizations)
	}
	return nil
}

// claimValues is a claim as the texts required_claims compares with: a
// string as itself, true/false, a number as written, and each element of
// a list (groups). Objects and null match nothing.
func claimValues(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case bool:
		return []string{fmt.Sprint(v)}
	case float64, json.Number:
		return []string{fmt.Sprint(v)}
	case []any:
		var out []string
		for _, e := range v {
			if _, nested := e.([]any); !nested {
				out = append(out, claimValues(e)...)
			}
		}
		return out
	}
	return nil
}

// clip bounds and cleans a provider-supplied text for an error or log line.
func clip(s string) string {
	const limit = 64
	var b strings.Builder
	for i, r := range s {
		if i >= limit {
			b.WriteString("…")
			break
		}
		if r < 0x20 || r == 0x7f {
			r = '?'
		}
		b.WriteRune(r)
	}
	return b.String()
}
