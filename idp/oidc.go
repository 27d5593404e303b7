package idp

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/jwks"
	"github.com/authsidecar/authsidecar/proxy"
)

// Google's documented endpoints (developers.google.com/identity/openid-connect):
// used as they are, without discovery, unless overridden.
const (
	googleIssuer   = "https://accounts.google.com"
	googleAuthURL  = "https://accounts.google.com/o/oauth2/v2/auth"
	googleTokenURL = "https://oauth2.googleapis.com/token"
	googleUserinfo = "https://openidconnect.googleapis.com/v1/userinfo"
	googleJWKS     = "https://www.googleapis.com/oauth2/v3/certs"
)

// defaultOIDCScopes are requested when the config names none.
var defaultOIDCScopes = []string{"openid", "email", "profile"}

// signingAlgs are the id-token algorithms ever accepted: asymmetric only.
// "none" and HMAC (whose key would be the client secret, which the
// provider and every other client of it may hold) are never on it.
var signingAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// oidcProvider is an OpenID Connect provider: kind oidc (discovery) or
// google (documented endpoints).
type oidcProvider struct {
	base
	google bool

	ctx    context.Context // cancelled by close: background discovery
	cancel context.CancelFunc

	mu      sync.Mutex
	meta    *oidcMeta // nil until discovery succeeded
	lastTry time.Time
	lastErr error
}

// oidcMeta is what discovery found (or Google's documented values), with
// the overrides applied.
type oidcMeta struct {
	issuer, authURL, tokenURL, userinfoURL, jwksURL string
	// issParam: the provider says it sends RFC 9207's iss on every
	// authorization response.
	issParam  bool
	algs      []string
	authStyle oauth2.AuthStyle
	keys      *proxy.KeyCache
	verifier  *oidc.IDTokenVerifier
}

func newOIDC(b base, google bool) *oidcProvider {
	p := &oidcProvider{base: b, google: google}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.o.Metrics.precreate(b.cfg.ID, "discovery", "jwks")
	go p.discover(p.ctx)
	return p
}

func (p *oidcProvider) close() {
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.meta != nil {
		p.meta.keys.Close()
	}
}

func (p *oidcProvider) UsesNonce() bool { return true }

// discover returns the provider's metadata, reading it the first time,
// and again while it fails, at most once per DiscoveryRetry; callers in
// between get the last error. Concurrent callers wait for one read.
func (p *oidcProvider) discover(ctx context.Context) (*oidcMeta, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.meta != nil {
		return p.meta, nil
	}
	now := p.o.Now()
	if !p.lastTry.IsZero() && now.Sub(p.lastTry) < p.o.DiscoveryRetry {
		return nil, p.lastErr
	}
	p.lastTry = now
	m, err := p.load(ctx)
	if err != nil {
		p.lastErr = errorf(issuer.ErrProviderUnavailable, "discovery: %v", err)
		p.o.Metrics.refreshed(p.cfg.ID, "discovery", "error")
		p.log.Warn("identity provider discovery failed; retrying on demand", "issuer", p.cfg.Issuer, "error", err.Error())
		return nil, p.lastErr
	}
	if !p.google {
		p.o.Metrics.refreshed(p.cfg.ID, "discovery", "ok")
	}
	p.meta = m
	return m, nil
}

func (p *oidcProvider) load(ctx context.Context) (*oidcMeta, error) {
	m := &oidcMeta{issuer: p.cfg.Issuer}
	if p.google {
		m.authURL, m.tokenURL, m.userinfoURL, m.jwksURL = googleAuthURL, googleTokenURL, googleUserinfo, googleJWKS
		m.algs, m.authStyle = []string{"RS256"}, oauth2.AuthStyleInParams
	} else {
		op, err := oidc.NewProvider(oidc.ClientContext(at(ctx, endpointDiscovery), p.client), p.cfg.Issuer)
		if err != nil {
			return nil, err
		}
		var d struct {
			JWKSURI     string   `json:"jwks_uri"`
			Userinfo    string   `json:"userinfo_endpoint"`
			IssParam    bool     `json:"authorization_response_iss_parameter_supported"`
			Algs        []string `json:"id_token_signing_alg_values_supported"`
			AuthMethods []string `json:"token_endpoint_auth_methods_supported"`
		}
		if err := op.Claims(&d); err != nil {
			return nil, fmt.Errorf("discovery document: %w", err)
		}
		ep := op.Endpoint()
		m.authURL, m.tokenURL, m.userinfoURL, m.jwksURL, m.issParam = ep.AuthURL, ep.TokenURL, d.Userinfo, d.JWKSURI, d.IssParam
		// Only asymmetric algorithms, whatever the document lists;
		// RS256 when it lists none (OpenID Connect Discovery 1.0 §3).
		for _, a := range d.Algs {
			if slices.Contains(signingAlgs, a) {
				m.algs = append(m.algs, a)
			}
		}
		if len(d.Algs) == 0 {
			m.algs = []string{"RS256"}
		}
		// client_secret_basic is the default of OpenID Connect Core §9;
		// client_secret_post only when the provider takes nothing else.
		m.authStyle = oauth2.AuthStyleInHeader
		if len(d.AuthMethods) > 0 && !slices.Contains(d.AuthMethods, "client_secret_basic") && slices.Contains(d.AuthMethods, "client_secret_post") {
			m.authStyle = oauth2.AuthStyleInParams
		}
	}
	if p.cfg.ClientSecret == "" {
		m.authStyle = oauth2.AuthStyleInParams // a public client sends its id only
	}
	e := p.cfg.Endpoints
	override(&m.authURL, e.Authorization)
	override(&m.tokenURL, e.Token)
	override(&m.userinfoURL, e.Userinfo)
	override(&m.jwksURL, e.JWKS)
	switch {
	case m.authURL == "" || m.tokenURL == "":
		return nil, errors.New("no authorization or token endpoint")
	case m.jwksURL == "":
		return nil, errors.New("no jwks_uri: id tokens could not be verified")
	case len(m.algs) == 0:
		return nil, errors.New("id_token_signing_alg_values_supported lists no asymmetric algorithm")
	}
	f, err := jwks.New(jwks.Options{URL: m.jwksURL, Client: p.client, ProviderKeys: true, MaxBytes: p.o.MaxBodyBytes, Timeout: p.o.Timeout, Logger: p.log})
	if err != nil {
		return nil, err
	}
	m.keys = proxy.NewKeyCache(proxy.KeyCacheOptions{
		Source:      labelled{f},
		MaxAge:      p.o.KeysMaxAge,
		Cooldown:    p.o.KeysCooldown,
		ReadTimeout: p.o.Timeout,
		OnRefresh: func(_, result string) {
			p.o.Metrics.refreshed(p.cfg.ID, "jwks", result)
		},
		Logger: p.log,
		Now:    p.o.Now,
	})
	// A failed first read leaves the cache retrying in the background.
	m.keys.Load(ctx)
	m.verifier = oidc.NewVerifier(m.issuer, &keySet{cache: m.keys, algs: m.algs}, &oidc.Config{
		ClientID: p.cfg.ClientID, SupportedSigningAlgs: m.algs, Now: p.o.Now,
	})
	return m, nil
}

func override(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// labelled names the key reads' endpoint for the request metrics.
type labelled struct{ src proxy.KeySource }

func (l labelled) PublicKeys(ctx context.Context) ([]proxy.Key, error) {
	return l.src.PublicKeys(at(ctx, endpointJWKS))
}

func (p *oidcProvider) oauth(m *oidcMeta, redirectURI string, scopes []string) *oauth2.Config {
	return &oauth2.Config{
		ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, RedirectURL: redirectURI, Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: m.authURL, TokenURL: m.tokenURL, AuthStyle: m.authStyle},
	}
}

func (p *oidcProvider) AuthCodeURL(ctx context.Context, a issuer.AuthRequest) (string, error) {
	m, err := p.discover(ctx)
	if err != nil {
		return "", err
	}
	scopes := p.scopes(defaultOIDCScopes, a.Scopes)
	if !slices.Contains(scopes, "openid") {
		scopes = append([]string{"openid"}, scopes...)
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(a.Verifier), oidc.Nonce(a.Nonce)}
	if a.LoginHint != "" {
		opts = append(opts, oauth2.SetAuthURLParam("login_hint", a.LoginHint))
	}
	if p.google {
		opts = append(opts, oauth2.SetAuthURLParam("include_granted_scopes", "true"))
	}
	return p.oauth(m, a.RedirectURI, scopes).AuthCodeURL(a.State, opts...), nil
}

func (p *oidcProvider) CheckIssuer(ctx context.Context, iss string, present bool) error {
	m, err := p.discover(ctx)
	if err != nil {
		return err
	}
	switch {
	case present && (iss == m.issuer || p.google && iss == "accounts.google.com"):
		return nil
	case present:
		return errorf(issuer.ErrIssuerMismatch, "iss %q, want %q", clip(iss), m.issuer)
	case m.issParam:
		return errorf(issuer.ErrIssuerMismatch, "no iss, and the provider advertises authorization_response_iss_parameter_supported")
	}
	return nil
}

func (p *oidcProvider) Exchange(ctx context.Context, x issuer.CodeExchange) (issuer.Identity, error) {
	m, err := p.discover(ctx)
	if err != nil {
		return issuer.Identity{}, err
	}
	tok, err := p.oauth(m, x.RedirectURI, nil).Exchange(oidc.ClientContext(at(ctx, endpointToken), p.client), x.Code, oauth2.VerifierOption(x.Verifier))
	if err != nil {
		return issuer.Identity{}, classify(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		// The openid scope makes an id token required (OpenID Connect
		// Core §3.1.3.3); without one the nonce binding cannot be checked.
		return issuer.Identity{}, errorf(issuer.ErrUserInfo, "the token response has no id_token")
	}
	claims, err := p.verify(ctx, m, raw, x.Nonce, true)
	if err != nil {
		return issuer.Identity{}, errorf(issuer.ErrUserInfo, "id token: %v", err)
	}
	if claims, err = p.withUserinfo(ctx, m, claims, tok.AccessToken); err != nil {
		return issuer.Identity{}, err
	}
	id, err := p.identity(claims)
	if err != nil {
		return issuer.Identity{}, err
	}
	id.Tokens = providerTokens(tok, raw, p.o.Now())
	return id, nil
}

func (p *oidcProvider) VerifyIDToken(ctx context.Context, raw, nonce string) (issuer.Identity, error) {
	m, err := p.discover(ctx)
	if err != nil {
		return issuer.Identity{}, err
	}
	claims, err := p.verify(ctx, m, raw, nonce, false)
	if err != nil {
		return issuer.Identity{}, errorf(issuer.ErrInvalidIDToken, "%v", err)
	}
	id, err := p.identity(claims)
	if err != nil {
		return issuer.Identity{}, err
	}
	id.Tokens = issuer.ProviderTokens{IDToken: raw}
	return id, nil
}

func (p *oidcProvider) Refresh(ctx context.Context, refreshToken string) (issuer.ProviderTokens, error) {
	m, err := p.discover(ctx)
	if err != nil {
		return issuer.ProviderTokens{}, err
	}
	return refresh(ctx, p.oauth(m, "", nil), p.client, refreshToken, p.o.Now())
}

// verify checks an id token: signature (keys from the JWKS, asymmetric
// algorithms only), iss, aud, exp and nbf (go-oidc), then what go-oidc
// leaves out: azp, iat not in the future, and the nonce, compared in
// constant time (required for the code flow, which always sends one).
func (p *oidcProvider) verify(ctx context.Context, m *oidcMeta, raw, nonce string, requireNonce bool) (map[string]any, error) {
	tok, err := m.verifier.Verify(at(ctx, endpointJWKS), raw)
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	if azp, ok := claims["azp"]; ok && azp != p.cfg.ClientID {
		return nil, fmt.Errorf("azp %v is not this client", azp)
	} else if !ok && len(tok.Audience) > 1 {
		// OpenID Connect Core 3.1.3.7: a token for several audiences
		// names the party it was issued to; without azp it may be
		// another client's.
		return nil, fmt.Errorf("no azp in a token for %d audiences", len(tok.Audience))
	}
	if tok.IssuedAt.IsZero() {
		return nil, errors.New("no iat")
	}
	if tok.IssuedAt.After(p.o.Now().Add(p.o.Leeway)) {
		return nil, fmt.Errorf("issued in the future (iat %s)", tok.IssuedAt.UTC().Format(time.RFC3339))
	}
	if requireNonce || nonce != "" {
		if subtle.ConstantTimeCompare([]byte(tok.Nonce), []byte(nonce)) != 1 || nonce == "" {
			return nil, errors.New("nonce does not match the flow's")
		}
	}
	if sub, _ := claims["sub"].(string); sub == "" {
		return nil, errors.New("no sub")
	}
	return claims, nil
}

// withUserinfo adds the userinfo endpoint's claims when the id token
// lacks the email or a required claim (oidc-provider, for one, puts no
// email in its id tokens). Userinfo must be about the same subject.
func (p *oidcProvider) withUserinfo(ctx context.Context, m *oidcMeta, claims map[string]any, accessToken string) (map[string]any, error) {
	need := claims["email"] == nil
	for name := range p.cfg.RequiredClaims {
		need = need || claims[name] == nil
	}
	if !need || m.userinfoURL == "" {
		return claims, nil
	}
	var info map[string]any
	if err := p.getJSON(ctx, endpointUserinfo, m.userinfoURL, accessToken, &info); err != nil {
		return nil, err
	}
	if info["sub"] != claims["sub"] {
		return nil, errorf(issuer.ErrUserInfo, "userinfo is about another subject")
	}
	for k, v := range info {
		if _, ok := claims[k]; !ok {
			claims[k] = v
		}
	}
	return claims, nil
}

// identity reads a user from verified claims and applies the provider's
// rules.
func (p *oidcProvider) identity(claims map[string]any) (issuer.Identity, error) {
	id := issuer.Identity{AccountID: claims["sub"].(string)}
	id.Email, _ = claims["email"].(string)
	id.Email = lower(id.Email)
	// true or "true" only: Better Auth once took the string "false" as
	// true (GHSA-g38m-r43w-p2q7).
	switch v := claims["email_verified"].(type) {
	case bool:
		id.EmailVerified = v
	case string:
		id.EmailVerified = v == "true"
	}
	id.Name, _ = claims["name"].(string)
	id.Image, _ = claims["picture"].(string)
	if err := p.admit(id, claims, nil); err != nil {
		return issuer.Identity{}, err
	}
	return id, nil
}
