// Package jwks fetches the public signing keys of a remote issuer from its
// JSON Web Key Set (RFC 7517), for a sidecar in verifier mode: contract
// §5.2 has tokens verified against the keys served at /api/auth/jwks, by
// another authsidecar or by Better Auth's jwt() plugin, instead of keys read
// from a local database.
//
// A Fetcher is a proxy.KeySource: the proxy's KeyCache decides when to
// fetch (boot, max age, unknown kid, retries) and keeps the last good keys
// when a fetch fails. The Fetcher only makes one fetch strict: bounded in
// time and size, no redirects, and only Ed25519 signing keys taken.
package jwks

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/authsidecar/authsidecar/internal/strictjson"
	"github.com/authsidecar/authsidecar/proxy"
)

// Options configures a Fetcher.
type Options struct {
	// URL is the JWKS document, an absolute http or https URL without
	// credentials, e.g. https://auth.example.com/api/auth/jwks. Required.
	URL string
	// CAFile is a PEM file of CA certificates trusted for an https URL on
	// top of the system roots. Zero: the system roots only. Not allowed
	// with Client (which brings its own trust).
	CAFile string
	// Timeout bounds one fetch, body included. Zero: 5s.
	Timeout time.Duration
	// MaxBytes bounds the response body; a larger one is an error. Zero:
	// 1 MiB (a JWKS is a few hundred bytes per key).
	MaxBytes int64
	// Logger receives one warning per skipped key. Zero: slog.Default().
	Logger *slog.Logger
	// Client sends the requests. It is copied, never changed; the copy
	// follows no redirects, and gets Timeout if it has none. Zero: a
	// client on a clone of http.DefaultTransport trusting CAFile.
	Client *http.Client
	// ProviderKeys takes the signing keys an OpenID provider publishes
	// for its id tokens: RSA (at least 2048 bits) and EC (P-256, P-384,
	// P-521) besides Ed25519, as proxy.Key.Provider. Zero: Ed25519 only,
	// what this sidecar and Better Auth sign JWTs with.
	ProviderKeys bool
}

// Fetcher reads the Ed25519 keys of a JWKS URL. It is safe for concurrent
// use.
type Fetcher struct {
	url      string
	client   *http.Client
	maxBytes int64
	log      *slog.Logger
	provider bool // Options.ProviderKeys

	mu      sync.Mutex
	skipped map[skip]bool // what has been logged, so max-age fetches stay quiet
}

// skip is one logged (kid, reason) pair.
type skip struct{ kid, reason string }

// maxSkipLog bounds the log-once memory: a hostile JWKS can invent new kids
// on every fetch, and remembering them all would grow without end.
const maxSkipLog = 1024

// New checks o and returns a Fetcher. It fetches nothing.
func New(o Options) (*Fetcher, error) {
	u, err := url.Parse(o.URL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("jwks url: %w", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Opaque != "":
		return nil, fmt.Errorf("jwks url %q: not an absolute http or https URL", o.URL)
	case u.User != nil:
		// Credentials in the URL would end up in every error and log line.
		return nil, errors.New("jwks url: must not carry credentials")
	case u.Fragment != "":
		return nil, fmt.Errorf("jwks url %q: must not have a fragment", o.URL)
	}
	if o.CAFile != "" && o.Client != nil {
		return nil, errors.New("jwks: CAFile and Client are exclusive")
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 1 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	var client http.Client
	if o.Client != nil {
		client = *o.Client
		if client.Timeout == 0 {
			client.Timeout = o.Timeout
		}
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if o.CAFile != "" {
			pool, err := caPool(o.CAFile)
			if err != nil {
				return nil, err
			}
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		client = http.Client{Transport: tr, Timeout: o.Timeout}
	}
	// A redirect could take the key fetch to a host nobody configured; the
	// operator must name the real URL.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Fetcher{
		url:      u.String(),
		client:   &client,
		maxBytes: o.MaxBytes,
		log:      o.Logger,
		provider: o.ProviderKeys,
		skipped:  map[skip]bool{},
	}, nil
}

// caPool returns the system roots plus the certificates in file.
func caPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("jwks CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool() // no system roots here: the file's CAs alone
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("jwks CA file %s: no PEM certificate in it", file)
	}
	return pool, nil
}

// URL returns the JWKS URL fetched.
func (f *Fetcher) URL() string { return f.url }

// PublicKeys fetches the JWKS once and returns its usable keys. An error
// (unreachable, non-200, too large, not a JWKS, no usable key, duplicate
// kid) leaves the caller's current keys in place.
func (f *Fetcher) PublicKeys(ctx context.Context) ([]proxy.Key, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", f.url, err)
	}
	req.Header.Set("Accept", "application/json")
	res, err := f.client.Do(req)
	if err != nil {
		// url.Error already names the method and URL.
		return nil, fmt.Errorf("fetch jwks: %w", err)
	}
	defer res.Body.Close()
	switch {
	case res.StatusCode >= 300 && res.StatusCode < 400:
		return nil, fmt.Errorf("fetch %s: status %d, a redirect (not followed)", f.url, res.StatusCode)
	case res.StatusCode != http.StatusOK:
		prefix, _ := io.ReadAll(io.LimitReader(res.Body, 64))
		return nil, fmt.Errorf("fetch %s: status %d (body %q)", f.url, res.StatusCode, sanitize(prefix))
	case res.ContentLength > f.maxBytes:
		return nil, fmt.Errorf("fetch %s: body larger than the %d bytes allowed (Content-Length %d)", f.url, f.maxBytes, res.ContentLength)
	}
	// One byte more than allowed tells "exactly at the limit" from "over".
	body, err := io.ReadAll(io.LimitReader(res.Body, f.maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: read body: %w", f.url, err)
	}
	if int64(len(body)) > f.maxBytes {
		return nil, fmt.Errorf("fetch %s: body larger than the %d bytes allowed", f.url, f.maxBytes)
	}
	keys, err := f.parse(body)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", f.url, err)
	}
	return keys, nil
}

// jwk holds the members of a key we look at. A member of the wrong JSON
// type makes the entry unusable, not the whole set.
type jwk struct {
	Kty string          `json:"kty"`
	Crv string          `json:"crv"`
	Kid string          `json:"kid"`
	X   string          `json:"x"`
	Y   string          `json:"y"` // EC
	N   string          `json:"n"` // RSA
	E   string          `json:"e"` // RSA
	Alg *string         `json:"alg"`
	Use *string         `json:"use"`
	D   json.RawMessage `json:"d"`
	// RSA private members besides d: any of them is a leaked key too.
	P json.RawMessage `json:"p"`
}

var strictB64 = base64.RawURLEncoding.Strict()

// parse returns the usable keys of a JWKS document. Two parsers that read a
// repeated member differently would see different keys, so duplicates are
// refused outright, as in JWT headers.
func (f *Fetcher) parse(body []byte) ([]proxy.Key, error) {
	if err := strictjson.CheckDuplicates(body); err != nil {
		return nil, fmt.Errorf("not a JWKS (body %q): %w", sanitize(body), err)
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.Keys == nil {
		return nil, fmt.Errorf("not a JWKS, no \"keys\" array (body %q)", sanitize(body))
	}
	var keys []proxy.Key
	seen := map[string]bool{}
	for _, raw := range doc.Keys {
		var k jwk
		if err := json.Unmarshal(raw, &k); err != nil {
			f.skip("", "entry is not a JSON object with string members")
			continue
		}
		var key proxy.Key
		var reason string
		if f.provider && k.Kty != "OKP" {
			key, reason = usableProviderKey(k)
		} else {
			var pub ed25519.PublicKey
			pub, reason = usable(k)
			key = proxy.Key{KID: k.Kid, Public: pub}
			if f.provider && k.Alg != nil {
				key.Alg = *k.Alg
			}
		}
		if reason != "" {
			f.skip(k.Kid, reason)
			continue
		}
		// Two keys under one kid: which one verifies a token is a guess.
		if seen[k.Kid] {
			return nil, fmt.Errorf("kid %q appears twice", sanitize([]byte(k.Kid)))
		}
		seen[k.Kid] = true
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		if f.provider {
			return nil, fmt.Errorf("no usable signing key among %d entries", len(doc.Keys))
		}
		return nil, fmt.Errorf("no usable Ed25519 signing key among %d entries", len(doc.Keys))
	}
	return keys, nil
}

// usable returns the Ed25519 public key of k, or why it cannot verify our
// tokens: only OKP/Ed25519 signing keys whose alg, if any, is EdDSA.
func usable(k jwk) (ed25519.PublicKey, string) {
	switch {
	case k.Kid == "":
		return nil, "no kid"
	case k.Kty != "OKP":
		return nil, "kty is not OKP"
	case k.Crv != "Ed25519":
		return nil, "crv is not Ed25519"
	case k.Alg != nil && *k.Alg != "EdDSA":
		return nil, "alg is not EdDSA"
	case k.Use != nil && *k.Use != "sig":
		return nil, "use is not sig"
	case k.D != nil:
		// A published private key is a leaked one: nothing it signs proves
		// anything.
		return nil, "carries a private key (d)"
	}
	x, err := strictB64.DecodeString(k.X)
	if err != nil || len(x) != ed25519.PublicKeySize {
		return nil, "x is not 32 bytes of unpadded base64url"
	}
	return ed25519.PublicKey(x), ""
}

// skip logs an unusable entry once per (kid, reason) for the Fetcher's
// lifetime: the same JWKS is fetched every max age.
func (f *Fetcher) skip(kid, reason string) {
	s := skip{sanitize([]byte(kid)), reason}
	f.mu.Lock()
	logged := f.skipped[s]
	full := len(f.skipped) >= maxSkipLog
	if !logged && !full {
		f.skipped[s] = true
	}
	last := !logged && !full && len(f.skipped) == maxSkipLog
	f.mu.Unlock()
	switch {
	case logged:
	case full:
		// Past the bound nothing new is logged: a document that invents
		// kids would otherwise log on every fetch.
	default:
		f.log.Warn("jwks key skipped", "url", f.url, "kid", s.kid, "reason", reason)
		if last {
			f.log.Warn("jwks: further skipped keys are not logged", "url", f.url, "logged", maxSkipLog)
		}
	}
}

// sanitize returns at most the first 64 bytes of b with anything but
// printable ASCII replaced, so a hostile response cannot forge log lines or
// flood an error message.
func sanitize(b []byte) string {
	const limit = 64
	cut := len(b) > limit
	if cut {
		b = b[:limit]
	}
	var sb strings.Builder
	for _, c := range b {
		if c < 0x20 || c >= 0x7f {
			c = '?'
		}
		sb.WriteByte(c)
	}
	if cut {
		sb.WriteString("…")
	}
	return sb.String()
}
