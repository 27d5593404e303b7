package idp

import (
	"context"
	"errors"
	"slices"

	"github.com/authsidecar/authsidecar/jwks"
)

// Report is what Probe found at a provider.
type Report struct {
	Issuer, AuthURL, TokenURL, UserinfoURL, JWKSURL string
	// IssParam: the provider says it sends RFC 9207's iss.
	IssParam bool
	// Algs are the id-token algorithms accepted from it.
	Algs []string
	// Keys is the number of usable signing keys in its JWKS.
	Keys int
}

// ErrNothingToProbe: the kind has no discovery document or JWKS (GitHub).
var ErrNothingToProbe = errors.New("no discovery document or JWKS to fetch")

// Probe reads a provider's discovery document (oidc) and JWKS once, as a
// sign-in would, for "authsidecar check -online". It keeps nothing.
func Probe(ctx context.Context, c Config, o Options) (Report, error) {
	o.defaults()
	p, err := newProvider(c, o)
	if err != nil {
		return Report{}, err
	}
	defer p.close()
	op, ok := p.(*oidcProvider)
	if !ok {
		return Report{}, ErrNothingToProbe
	}
	m, err := op.discover(ctx)
	if err != nil {
		return Report{}, err
	}
	r := Report{Issuer: m.issuer, AuthURL: m.authURL, TokenURL: m.tokenURL, UserinfoURL: m.userinfoURL, JWKSURL: m.jwksURL,
		IssParam: m.issParam, Algs: slices.Clone(m.algs)}
	// A fetch of its own, for the error a cache would keep to itself.
	f, err := jwks.New(jwks.Options{URL: m.jwksURL, Client: op.client, ProviderKeys: true, MaxBytes: o.MaxBodyBytes, Timeout: o.Timeout, Logger: o.Logger})
	if err != nil {
		return r, err
	}
	keys, err := f.PublicKeys(at(ctx, endpointJWKS))
	r.Keys = len(keys)
	return r, err
}
