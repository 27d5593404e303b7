package revocation

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

type oneKey struct{ pub ed25519.PublicKey }

func (k oneKey) Lookup(_ context.Context, kid string) (ed25519.PublicKey, error) {
	if kid != "k1" {
		return nil, errors.New("unknown kid")
	}
	return k.pub, nil
}

func compact(priv ed25519.PrivateKey, header, payload any) string {
	h, _ := json.Marshal(header)
	p, _ := json.Marshal(payload)
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p)
	return in + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(in)))
}

// TestOpenAnswerRefuses: only a fresh answer of the feed, from the issuer,
// to this very request, signed by its key, is taken; a user token (typ
// JWT) never is.
func TestOpenAnswerRefuses(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	now := time.Now()
	good := func() map[string]any {
		return map[string]any{"iss": "http://iss", "aud": feedAudience, "iat": now.Unix(), "exp": now.Unix() + 60, "since": "7",
			"cursor": "9", "reset": false, "complete": true, "all": 0, "sessions": "", "users": ""}
	}
	hdr := map[string]any{"alg": "EdDSA", "kid": "k1", "typ": FeedType}
	with := func(k string, v any) map[string]any { p := good(); p[k] = v; return p }
	for _, tc := range []struct {
		name string
		tok  string
		want string
	}{
		{"good", compact(priv, hdr, good()), ""},
		{"a user token's typ", compact(priv, map[string]any{"alg": "EdDSA", "kid": "k1", "typ": "JWT"}, good()), "typ"},
		{"no typ", compact(priv, map[string]any{"alg": "EdDSA", "kid": "k1"}, good()), "typ"},
		{"another key", compact(other, hdr, good()), "signature"},
		{"unknown kid", compact(priv, map[string]any{"alg": "EdDSA", "kid": "k2", "typ": FeedType}, good()), "key"},
		{"another issuer", compact(priv, hdr, with("iss", "http://evil")), "iss"},
		{"another audience", compact(priv, hdr, with("aud", "http://iss")), "aud"},
		{"another request's answer", compact(priv, hdr, with("since", "3")), "since"},
		{"expired", compact(priv, hdr, with("exp", now.Unix()-60)), "stale"},
		{"an unknown member", compact(priv, hdr, with("extra", 1)), "unknown field"},
		{"not compact", `{"payload":"x"}`, "compact"},
	} {
		_, err := openAnswer(context.Background(), oneKey{pub}, []byte(tc.tok), "http://iss", "7", now)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: got %v, want it taken", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error about %s", tc.name, err, tc.want)
		}
	}
	// A duplicate member is refused: two readers could read it two ways.
	h, _ := json.Marshal(hdr)
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"http://iss","iss":"http://iss"}`))
	dup := in + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(in)))
	if _, err := openAnswer(context.Background(), oneKey{pub}, []byte(dup), "http://iss", "7", now); err == nil {
		t.Error("a payload with a duplicate member was taken")
	}
}
