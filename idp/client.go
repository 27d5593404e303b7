package idp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Every call to an identity provider goes through one client per
// provider: bounded in time (Options.Timeout, the whole exchange, body
// included) and size (Options.MaxBodyBytes), following no redirects (a
// redirect could take a code or a client secret to a host nobody
// configured), and timed per endpoint for the metrics.

// Endpoint names, the "endpoint" label of the request metrics.
const (
	endpointDiscovery = "discovery"
	endpointJWKS      = "jwks"
	endpointToken     = "token"
	endpointUserinfo  = "userinfo"
	endpointUser      = "user"   // GitHub /user
	endpointEmails    = "emails" // GitHub /user/emails
	endpointOrgs      = "orgs"   // GitHub /user/memberships/orgs/{org}
)

type endpointKey struct{}

// at names the endpoint a request made under ctx goes to.
func at(ctx context.Context, endpoint string) context.Context {
	return context.WithValue(ctx, endpointKey{}, endpoint)
}

// errBodyTooLarge: the provider answered more than MaxBodyBytes.
var errBodyTooLarge = errors.New("response body too large")

// transport times each round trip and caps what may be read of its body.
type transport struct {
	base     http.RoundTripper
	provider string
	maxBytes int64
	metrics  *Metrics
	now      func() time.Time
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	endpoint, _ := r.Context().Value(endpointKey{}).(string)
	if endpoint == "" {
		endpoint = "other"
	}
	start := t.now()
	res, err := t.base.RoundTrip(r)
	if err != nil {
		t.metrics.observe(t.provider, endpoint, t.now().Sub(start), false)
		return nil, err
	}
	if res.ContentLength > t.maxBytes {
		res.Body.Close()
		t.metrics.observe(t.provider, endpoint, t.now().Sub(start), false)
		return nil, fmt.Errorf("%s %s: %w (Content-Length %d, at most %d)", r.Method, r.URL.Redacted(), errBodyTooLarge, res.ContentLength, t.maxBytes)
	}
	res.Body = &cappedBody{ReadCloser: res.Body, left: t.maxBytes, done: func(ok bool) {
		t.metrics.observe(t.provider, endpoint, t.now().Sub(start), ok && res.StatusCode < 500)
	}}
	return res, nil
}

// cappedBody fails a read past its limit instead of truncating silently
// (a truncated JSON document could still parse), and reports once, at
// EOF, error or close, how the exchange ended.
type cappedBody struct {
	io.ReadCloser
	left     int64
	done     func(ok bool)
	reported bool
}

func (b *cappedBody) Read(p []byte) (int, error) {
	// One byte more than is left tells "exactly at the limit" from "over".
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		b.report(false)
		return 0, errBodyTooLarge
	}
	if err != nil {
		b.report(errors.Is(err, io.EOF))
	}
	return n, err
}

func (b *cappedBody) Close() error {
	b.report(true)
	return b.ReadCloser.Close()
}

func (b *cappedBody) report(ok bool) {
	if !b.reported {
		b.reported = true
		b.done(ok)
	}
}

// newClient returns the provider's client over the shared base transport.
func newClient(base http.RoundTripper, provider string, o Options, m *Metrics) *http.Client {
	return &http.Client{
		Transport: &transport{base: base, provider: provider, maxBytes: o.MaxBodyBytes, metrics: m, now: o.Now},
		Timeout:   o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
