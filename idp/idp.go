// Package idp talks to the identity providers users sign in with: any
// OpenID Connect provider with discovery (Okta, Entra ID, Keycloak,
// Auth0, ...), Google and GitHub. Each is an issuer.Provider: the issuer
// keeps the flow (state, PKCE verifier, nonce), the users and sessions;
// this package builds the authorization URL, exchanges the code
// (golang.org/x/oauth2, PKCE S256), verifies id tokens
// (github.com/coreos/go-oidc/v3, with keys from the provider's JWKS read
// through the same bounded fetcher and key cache as verifier mode:
// packages jwks and proxy), reads userinfo or GitHub's API, and applies
// the provider's own rules (allowed email domains, required claims,
// allowed GitHub organizations).
//
// Every call to a provider is bounded in time and size and follows no
// redirect; none logs a token or a code.
package idp

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
)

// Kinds of provider.
const (
	KindOIDC   = "oidc"
	KindGoogle = "google"
	KindGitHub = "github"
)

// Config is one provider, as identity_providers in the config file says.
type Config struct {
	// ID is the providerId on the wire. Required.
	ID string
	// Kind is KindOIDC, KindGoogle or KindGitHub. Required.
	Kind string
	// Issuer is the OpenID issuer: discovery is read from it (oidc) and id
	// tokens must carry it. Required for oidc; google: zero means
	// https://accounts.google.com; github: unused.
	Issuer string
	// ClientID is required; ClientSecret may be empty for a public oidc
	// client (PKCE alone).
	ClientID, ClientSecret string
	// Scopes replace the kind's defaults. Zero: the defaults.
	Scopes []string
	// AllowedEmailDomains, RequiredClaims and AllowedOrganizations admit
	// users (see config.IdentityProvider). Zero: everyone.
	AllowedEmailDomains  []string
	RequiredClaims       map[string][]string
	AllowedOrganizations []string
	// SignUp and LinkByEmail are the issuer's rules for this provider.
	SignUp, LinkByEmail bool
	// TrustUnverifiedEmail lets identities whose email the provider does
	// not say is verified sign up, their address unclaimed
	// (issuer.User.EmailUnclaimed). oidc only. Zero: refused.
	TrustUnverifiedEmail bool
	// Endpoints override discovery or the kind's documented endpoints.
	Endpoints Endpoints
}

// Endpoints override a provider's endpoints; zero fields are not
// overridden.
type Endpoints struct {
	Authorization, Token, Userinfo, JWKS, API string
}

// Options are shared by every provider of a Set.
type Options struct {
	// Timeout bounds one request to a provider, body included. Zero: 10s.
	Timeout time.Duration
	// MaxBodyBytes bounds one response body. Zero: 1 MiB.
	MaxBodyBytes int64
	// KeysMaxAge and KeysCooldown are the JWKS cache's, as keys.max_age
	// and keys.cooldown are verifier mode's. Zero: 10m and 30s.
	KeysMaxAge, KeysCooldown time.Duration
	// DiscoveryRetry is the least time between two discovery attempts
	// while discovery fails. Zero: 10s.
	DiscoveryRetry time.Duration
	// Leeway is the clock skew allowed for an id token's iat. Zero: 30s.
	Leeway time.Duration
	// Transport sends the requests. Zero: a clone of
	// http.DefaultTransport, shared by the Set's providers.
	Transport http.RoundTripper
	// Metrics receives request and refresh metrics. Zero: unregistered.
	Metrics *Metrics
	// Logger and Now; zero: slog.Default() and time.Now.
	Logger *slog.Logger
	Now    func() time.Time
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Timeout, 10*time.Second)
	def(&o.KeysMaxAge, 10*time.Minute)
	def(&o.KeysCooldown, 30*time.Second)
	def(&o.DiscoveryRetry, 10*time.Second)
	def(&o.Leeway, 30*time.Second)
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.Transport == nil {
		o.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// provider is what every kind implements: issuer.Provider, and Close.
type provider interface {
	issuer.Provider
	close()
}

// base is what the kinds share.
type base struct {
	cfg    Config
	client *http.Client
	o      Options
	log    *slog.Logger
}

func (b *base) ID() string        { return b.cfg.ID }
func (b *base) SignUp() bool      { return b.cfg.SignUp }
func (b *base) LinkByEmail() bool { return b.cfg.LinkByEmail }

func (b *base) TrustUnverifiedEmail() bool { return b.cfg.TrustUnverifiedEmail }

// scopes is the configured scopes (or defaults) plus those the request
// adds, each once, in order.
func (b *base) scopes(defaults, extra []string) []string {
	out := slices.Clone(b.cfg.Scopes)
	if len(out) == 0 {
		out = slices.Clone(defaults)
	}
	for _, s := range extra {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// newProvider builds one provider of its kind. It reads nothing from the
// network: an OpenID provider discovers in the background.
func newProvider(c Config, o Options) (provider, error) {
	if c.ID == "" || c.ClientID == "" {
		return nil, errors.New("idp: a provider needs an id and a client id")
	}
	b := base{cfg: c, client: newClient(o.Transport, c.ID, o, o.Metrics), o: o, log: o.Logger.With("provider", c.ID)}
	switch c.Kind {
	case KindOIDC:
		if c.Issuer == "" {
			return nil, fmt.Errorf("idp %s: kind oidc needs an issuer", c.ID)
		}
		return newOIDC(b, false), nil
	case KindGoogle:
		if b.cfg.Issuer == "" {
			b.cfg.Issuer = googleIssuer
		}
		return newOIDC(b, true), nil
	case KindGitHub:
		return newGitHub(b), nil
	}
	return nil, fmt.Errorf("idp %s: unknown kind %q", c.ID, c.Kind)
}

// Set is the providers a running issuer serves. Build one with NewSet,
// switch to another with Reload, and Close it when done.
type Set struct {
	o     Options
	cfgs  []Config
	provs []provider
}

// NewSet builds the providers of cfgs, in order. It reads nothing from
// the network; discovery and keys are read in the background, and again
// on demand while they fail.
func NewSet(cfgs []Config, o Options) (*Set, error) {
	o.defaults()
	s := &Set{o: o}
	for _, c := range cfgs {
		p, err := newProvider(c, o)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.cfgs = append(s.cfgs, c)
		s.provs = append(s.provs, p)
	}
	return s, nil
}

// Providers returns the providers, in the configured order.
func (s *Set) Providers() []issuer.Provider {
	out := make([]issuer.Provider, len(s.provs))
	for i, p := range s.provs {
		out[i] = p
	}
	return out
}

// Reload returns a Set for cfgs that shares s's providers whose Config
// is unchanged (their discovery, keys and connections) and builds the
// others. s is not changed: once the new Set is in force, s.Retire(next)
// closes what only s had; if it is not put in force, next.Retire(s)
// closes what only next had.
func (s *Set) Reload(cfgs []Config) (*Set, error) {
	next := &Set{o: s.o}
	taken := map[int]bool{}
	for _, c := range cfgs {
		var p provider
		for i, old := range s.cfgs {
			if !taken[i] && reflect.DeepEqual(old, c) {
				p, taken[i] = s.provs[i], true
				break
			}
		}
		if p == nil {
			var err error
			if p, err = newProvider(c, s.o); err != nil {
				next.Retire(s)
				return nil, err
			}
		}
		next.cfgs = append(next.cfgs, c)
		next.provs = append(next.provs, p)
	}
	return next, nil
}

// Retire closes s's providers that keep does not hold.
func (s *Set) Retire(keep *Set) {
	for _, p := range s.provs {
		if keep == nil || !slices.Contains(keep.provs, p) {
			p.close()
		}
	}
}

// Close stops every provider's background work.
func (s *Set) Close() {
	for _, p := range s.provs {
		p.close()
	}
}

// lower is strings.ToLower for emails and domains.
func lower(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// errorf wraps a class error with a cause for the log.
func errorf(class error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", class, fmt.Sprintf(format, args...))
}
