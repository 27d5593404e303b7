package idp

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/oauth2"

	"github.com/authsidecar/authsidecar/issuer"
)

// GitHub's documented endpoints (docs.github.com: "Authorizing OAuth
// apps"), used as they are unless overridden (GitHub Enterprise, tests).
const (
	githubAuthURL  = "https://github.com/login/oauth/authorize"
	githubTokenURL = "https://github.com/login/oauth/access_token"
	githubAPI      = "https://api.github.com"
)

// githubProvider is GitHub's OAuth apps: no id token; the user comes from
// the REST API, the email from /user/emails (the primary address, and
// whether GitHub verified it: never the public profile email, which may
// be an unverified one), the organizations from the memberships API.
type githubProvider struct {
	base
	authURL, tokenURL, api string
}

func newGitHub(b base) *githubProvider {
	p := &githubProvider{base: b, authURL: githubAuthURL, tokenURL: githubTokenURL, api: githubAPI}
	override(&p.authURL, b.cfg.Endpoints.Authorization)
	override(&p.tokenURL, b.cfg.Endpoints.Token)
	override(&p.api, b.cfg.Endpoints.API)
	p.api = strings.TrimSuffix(p.api, "/")
	return p
}

func (p *githubProvider) close()          {}
func (p *githubProvider) UsesNonce() bool { return false }

// CheckIssuer accepts any iss: GitHub has no issuer identifier to compare
// with and sends none.
func (p *githubProvider) CheckIssuer(context.Context, string, bool) error { return nil }

func (p *githubProvider) VerifyIDToken(context.Context, string, string) (issuer.Identity, error) {
	return issuer.Identity{}, issuer.ErrIDTokenUnsupported
}

func (p *githubProvider) oauth(redirectURI string, scopes []string) *oauth2.Config {
	return &oauth2.Config{
		ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, RedirectURL: redirectURI, Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: p.authURL, TokenURL: p.tokenURL, AuthStyle: oauth2.AuthStyleInParams},
	}
}

// defaultGitHubScopes are requested when the config names none.
var defaultGitHubScopes = []string{"read:user", "user:email"}

func (p *githubProvider) AuthCodeURL(_ context.Context, a issuer.AuthRequest) (string, error) {
	var extra []string
	if len(p.cfg.AllowedOrganizations) > 0 {
		extra = append(extra, "read:org") // the memberships API needs it
	}
	scopes := p.scopes(defaultGitHubScopes, append(extra, a.Scopes...))
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(a.Verifier)}
	if a.LoginHint != "" {
		opts = append(opts, oauth2.SetAuthURLParam("login", a.LoginHint))
	}
	return p.oauth(a.RedirectURI, scopes).AuthCodeURL(a.State, opts...), nil
}

func (p *githubProvider) Exchange(ctx context.Context, x issuer.CodeExchange) (issuer.Identity, error) {
	ctx = context.WithValue(at(ctx, endpointToken), oauth2.HTTPClient, p.client)
	tok, err := p.oauth(x.RedirectURI, nil).Exchange(ctx, x.Code, oauth2.VerifierOption(x.Verifier))
	if err != nil {
		return issuer.Identity{}, classify(err)
	}
	var user struct {
		ID        int64  `json:"id"`
		Login     string `json:"login"`
		Name      string `json:"name"`
		AvatarURL string `json:"avatar_url"`
	}
	if err := p.getJSON(ctx, endpointUser, p.api+"/user", tok.AccessToken, &user); err != nil {
		return issuer.Identity{}, err
	}
	if user.ID <= 0 {
		return issuer.Identity{}, errorf(issuer.ErrUserInfo, "/user has no id")
	}
	var emails []struct {
		Email    string `json:"email"`
		Primary  bool   `json:"primary"`
		Verified bool   `json:"verified"`
	}
	if err := p.getJSON(ctx, endpointEmails, p.api+"/user/emails", tok.AccessToken, &emails); err != nil {
		return issuer.Identity{}, err
	}
	id := issuer.Identity{AccountID: strconv.FormatInt(user.ID, 10), Name: user.Name, Image: user.AvatarURL}
	if id.Name == "" {
		id.Name = user.Login
	}
	for _, e := range emails {
		if e.Primary {
			id.Email, id.EmailVerified = lower(e.Email), e.Verified
			break
		}
	}
	orgs, err := p.memberships(ctx, tok.AccessToken)
	if err != nil {
		return issuer.Identity{}, err
	}
	if err := p.admit(id, nil, orgs); err != nil {
		return issuer.Identity{}, err
	}
	id.Tokens = providerTokens(tok, "", p.o.Now())
	return id, nil
}

// memberships returns the allowed organizations the user is an active
// member of, asking GitHub once per allowed organization
// (GET /user/memberships/orgs/{org}: 200 with state "active" for a
// member; 404 or 403 otherwise), so no list needs paging.
func (p *githubProvider) memberships(ctx context.Context, accessToken string) ([]string, error) {
	var out []string
	for _, org := range p.cfg.AllowedOrganizations {
		var m struct {
			State string `json:"state"`
		}
		err := p.getJSON(ctx, endpointOrgs, p.api+"/user/memberships/orgs/"+url.PathEscape(org), accessToken, &m)
		switch {
		case err == nil && m.State == "active":
			out = append(out, org)
		case err == nil:
		case isRefusal(err):
			// Not a member (404), or the org hides it (403): not admitted
			// through this org.
		default:
			return nil, err
		}
	}
	return out, nil
}

func (p *githubProvider) Refresh(ctx context.Context, refreshToken string) (issuer.ProviderTokens, error) {
	return refresh(ctx, p.oauth("", nil), p.client, refreshToken, p.o.Now())
}
