package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseIdentityProviders(t *testing.T) {
	c, err := Parse("good-idp.yaml", readTestdata(t, "good-idp.yaml"))
	if err != nil {
		t.Fatalf("got %v, want no error", err)
	}
	if got := len(c.IdentityProviders); got != 3 {
		t.Fatalf("got %d providers, want 3", got)
	}
	corp, google, gh := c.IdentityProviders[0], c.IdentityProviders[1], c.IdentityProviders[2]
	if got, want := corp.RequiredClaims, map[string]ClaimValues{"groups": {"staff", "admins"}, "email_verified": {"true"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("required_claims: got %v, want %v", got, want)
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"corp sign_up", corp.SignUpAllowed(), false},
		{"corp link_by_email (default)", corp.LinksByEmail(), true},
		{"corp trust_unverified_email", corp.TrustUnverifiedEmail, true},
		{"google trust_unverified_email (default)", google.TrustUnverifiedEmail, false},
		{"google sign_up (default)", google.SignUpAllowed(), true},
		{"google link_by_email", google.LinksByEmail(), false},
		{"google issuer (default)", google.IssuerURL(), "https://accounts.google.com"},
		{"corp issuer", corp.IssuerURL(), "https://idp.example.com/realms/staff"},
		{"github api", gh.Endpoints.API, "http://127.0.0.1:9000/api/v3"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestLoadProviderSecrets(t *testing.T) {
	c, err := Parse("good-idp.yaml", readTestdata(t, "good-idp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CORP_CLIENT_SECRET": "corp-secret-value", "GOOGLE_CLIENT_SECRET": "g-secret-value"}
	_, err = c.LoadProviderSecrets(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "identity_providers[2].client_secret_env: $GITHUB_CLIENT_SECRET is not set") {
		t.Fatalf("got %v, want the missing GitHub secret named", err)
	}
	if strings.Contains(err.Error(), "corp-secret-value") {
		t.Errorf("got %v, want no secret value in the message", err)
	}
	env["GITHUB_CLIENT_SECRET"] = "gh-secret-value"
	got, err := c.LoadProviderSecrets(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s := string(got["github"].Bytes()); s != "gh-secret-value" {
		t.Errorf("got github secret %q, want gh-secret-value", s)
	}
}

// TestIdentityProvidersReload: the list reloads whole, so an edit to any
// provider needs no restart.
func TestIdentityProvidersReload(t *testing.T) {
	old := Default()
	next, err := Parse("good-idp.yaml", readTestdata(t, "good-idp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if keys := RestartKeys(old, next); len(keys) != 0 {
		t.Errorf("got restart keys %q, want none", keys)
	}
}

// TestOldConfigHasNoProviders: a file written before identity_providers
// existed loads with none.
func TestOldConfigHasNoProviders(t *testing.T) {
	c, err := Parse("good.yaml", readTestdata(t, "good.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.IdentityProviders == nil || len(c.IdentityProviders) != 0 {
		t.Errorf("got %#v, want an empty list", c.IdentityProviders)
	}
}
