package revocation

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"

	"github.com/authsidecar/authsidecar/internal/strictjson"
)

// This file is the only one here that calls jwx: a feed answer is hostile
// input until its signature, header and claims have passed.

// KeyLookup returns the public key for a kid: the verifier's key cache,
// which reads the issuer's JWKS (proxy.KeyCache implements it).
type KeyLookup interface {
	Lookup(ctx context.Context, kid string) (ed25519.PublicKey, error)
}

// openAnswer checks a feed answer: compact serialization, alg EdDSA, typ
// FeedType, a kid the issuer's JWKS has, a good signature, and a payload
// (strict JSON, no duplicate names) from issuer, for the feed, answering
// since, and fresh at now. It returns the payload.
func openAnswer(ctx context.Context, keys KeyLookup, body []byte, issuer, since string, now time.Time) (feedPayload, error) {
	var p feedPayload
	body = bytes.TrimSpace(body)
	if bytes.Count(body, []byte{'.'}) != 2 {
		return p, errors.New("answer is not a compact JWS")
	}
	msg, err := jws.Parse(body, jws.WithCompact())
	if err != nil {
		return p, fmt.Errorf("answer: %w", err)
	}
	if len(msg.Signatures()) != 1 {
		return p, errors.New("answer has more than one signature")
	}
	h := msg.Signatures()[0].ProtectedHeaders()
	switch {
	case h.Algorithm() != jwa.EdDSA:
		return p, fmt.Errorf("answer alg %q, want EdDSA", h.Algorithm())
	case h.Type() != FeedType:
		return p, fmt.Errorf("answer typ %q, want %q", h.Type(), FeedType)
	case h.KeyID() == "":
		return p, errors.New("answer names no kid")
	}
	key, err := keys.Lookup(ctx, h.KeyID())
	if err != nil {
		return p, fmt.Errorf("answer key %q: %w", h.KeyID(), err)
	}
	payload, err := jws.Verify(body, jws.WithKey(jwa.EdDSA, key), jws.WithCompact())
	if err != nil {
		return p, fmt.Errorf("answer signature: %w", err)
	}
	if err := strictjson.CheckDuplicates(payload); err != nil {
		return p, fmt.Errorf("answer payload: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("answer payload: %w", err)
	}
	switch {
	case p.Iss != issuer:
		return p, fmt.Errorf("answer iss %q, want %q", p.Iss, issuer)
	case p.Aud != feedAudience:
		return p, fmt.Errorf("answer aud %q, want %q", p.Aud, feedAudience)
	case p.Since != since:
		// An answer to another request, replayed.
		return p, fmt.Errorf("answer is for since=%q, asked since=%q", p.Since, since)
	case now.Unix() >= p.Exp+int64(clockSkew/time.Second) || now.Unix()+int64(clockSkew/time.Second) < p.Iat:
		return p, errors.New("answer is stale or from the future")
	case p.Cursor == "":
		return p, errors.New("answer has no cursor")
	}
	return p, nil
}

// clockSkew is what the issuer's and the verifier's clocks may differ by
// when a feed answer's iat and exp are judged.
const clockSkew = 30 * time.Second
