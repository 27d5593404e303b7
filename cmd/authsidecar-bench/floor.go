package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/jwks"
)

// runFloor is the hidden "floor" mode: the bare proxy plus the one thing
// no JWT verifier can skip, a crypto/ed25519.Verify of the Bearer token's
// signature over its signing input, on every request (issue 14). Scenario
// c, a new token every request, is the sidecar's verifier at its cold
// path; this is that path's lower bound on the same machine, in the same
// run, under the same load generator. It checks nothing else (no header,
// exp, iss or aud) and caches nothing.
func runFloor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pf := addProxyFlags(fs)
	jwksURL := fs.String("jwks-url", "", "JWKS to take the public key from, once at start: http://127.0.0.1:PORT/api/auth/jwks")
	kid := fs.String("kid", "", "kid of the key that signed the tokens")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kid == "" {
		return fmt.Errorf("%w: -kid is required", errUsage)
	}
	rp, err := pf.proxy(stderr, "floor")
	if err != nil {
		return err
	}
	pub, err := fetchKey(ctx, *jwksURL, *kid)
	if err != nil {
		return err
	}
	return serveUntil(ctx, *pf.listen, floor{pub: pub, next: rp}, stdout, stderr)
}

// fetchKey reads the key kid from the JWKS at url, with the fetcher a
// verifier-mode sidecar uses. Once, before serving: the floor measures
// the per-request cost, and key fetching is not one.
func fetchKey(ctx context.Context, url, kid string) (ed25519.PublicKey, error) {
	u, err := loopbackURL(url)
	if err != nil {
		return nil, fmt.Errorf("%w: -jwks-url %w", errUsage, err)
	}
	f, err := jwks.New(jwks.Options{URL: u.String(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	keys, err := f.PublicKeys(ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.KID == kid {
			return k.Public, nil
		}
	}
	return nil, fmt.Errorf("jwks %s: no key %q among %d", u, kid, len(keys))
}

// floor verifies the Bearer token's signature and hands the request to
// next; anything else is 401, so a run with no errors proves every
// request paid for one verification.
type floor struct {
	pub  ed25519.PublicKey
	next http.Handler
}

// The floor forwards the Authorization header, as the bare proxy does;
// its 401 has a JSON body, as every rejection of the sidecar has.
var unauthorizedBody = []byte(`{"error":"unauthorized"}` + "\n")

func (f floor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	dot := strings.LastIndexByte(tok, '.')
	if !ok || dot < 0 || !f.verify(tok[:dot], tok[dot+1:]) {
		h := w.Header()
		h["Content-Type"] = jsonType
		w.WriteHeader(http.StatusUnauthorized)
		w.Write(unauthorizedBody)
		return
	}
	f.next.ServeHTTP(w, r)
}

// verify is the whole of the floor's work: decode the 64-byte signature
// (86 base64url characters, unpadded) and check it over header.payload.
func (f floor) verify(signingInput, sig64 string) bool {
	var sig [ed25519.SignatureSize]byte
	if base64.RawURLEncoding.DecodedLen(len(sig64)) != len(sig) {
		return false
	}
	if n, err := base64.RawURLEncoding.Decode(sig[:], []byte(sig64)); err != nil || n != len(sig) {
		return false
	}
	return ed25519.Verify(f.pub, []byte(signingInput), sig[:])
}

// tokenKID reads the kid from a JWT's header: the benchmark tells the
// floor which JWKS key signed its tokens, so the floor need not parse a
// header per request.
func tokenKID(jwt string) (string, error) {
	h, _, ok := strings.Cut(jwt, ".")
	if !ok {
		return "", fmt.Errorf("not a JWT: no '.'")
	}
	b, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		return "", fmt.Errorf("JWT header: %w", err)
	}
	var hdr struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(b, &hdr); err != nil || hdr.Kid == "" {
		return "", fmt.Errorf("JWT header %s: no kid", b)
	}
	return hdr.Kid, nil
}
