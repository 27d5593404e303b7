package proxy_test

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/proxy"
)

// staticKeys is a KeySource over keys held in the test, with a switch to
// make reads fail and a count of reads.
type staticKeys struct {
	mu    sync.Mutex
	keys  []proxy.Key
	fail  bool
	reads int
	gate  chan struct{} // when set, reads wait for it
}

func (s *staticKeys) PublicKeys(ctx context.Context) ([]proxy.Key, error) {
	s.mu.Lock()
	s.reads++
	gate, fail, keys := s.gate, s.fail, append([]proxy.Key(nil), s.keys...)
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if fail {
		return nil, errors.New("store down")
	}
	return keys, nil
}

func (s *staticKeys) set(f func(*staticKeys)) {
	s.mu.Lock()
	f(s)
	s.mu.Unlock()
}

func (s *staticKeys) readCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

var b64 = base64.RawURLEncoding

// signRaw signs exact header and payload bytes.
func signRaw(priv ed25519.PrivateKey, header, payload string) string {
	in := b64.EncodeToString([]byte(header)) + "." + b64.EncodeToString([]byte(payload))
	return in + "." + b64.EncodeToString(ed25519.Sign(priv, []byte(in)))
}

// sign makes a compact JWS from raw header and claims maps.
func sign(priv ed25519.PrivateKey, header, claims map[string]any) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	in := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	return in + "." + b64.EncodeToString(ed25519.Sign(priv, []byte(in)))
}

// hostileToken is a token that must be refused, and why.
type hostileToken struct {
	name   string
	token  string
	reason string
}

// hostileTokens builds the refusal table: tokens signed with priv under
// kid "k1" (pub), or with otherPriv, at time now. It also returns a good
// token, to prove the setup accepts something.
func hostileTokens(priv, otherPriv ed25519.PrivateKey, pub ed25519.PublicKey, now time.Time) (good string, tests []hostileToken) {
	hdr := func() map[string]any { return map[string]any{"alg": "EdDSA", "kid": "k1", "typ": "JWT"} }
	claims := func() map[string]any {
		return map[string]any{"sub": "user-1", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "iss": origin, "aud": origin}
	}
	with := func(m map[string]any, k string, v any) map[string]any {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	good = sign(priv, hdr(), claims())
	parts := strings.Split(good, ".")
	hs := hmac.New(sha256.New, pub)
	hsHeader := b64.EncodeToString([]byte(`{"alg":"HS256","kid":"k1","typ":"JWT"}`))
	hs.Write([]byte(hsHeader + "." + parts[1]))
	tests = []hostileToken{
		{"alg none", b64.EncodeToString([]byte(`{"alg":"none","kid":"k1"}`)) + "." + parts[1] + ".", proxy.ReasonMalformed},
		{"alg none with signature", b64.EncodeToString([]byte(`{"alg":"none","kid":"k1"}`)) + "." + parts[1] + "." + parts[2], proxy.ReasonMalformed},
		{"HS256 with the public key", hsHeader + "." + parts[1] + "." + b64.EncodeToString(hs.Sum(nil)), proxy.ReasonMalformed},
		{"other key, known kid", sign(otherPriv, hdr(), claims()), proxy.ReasonBadSignature},
		{"unknown kid", sign(priv, with(hdr(), "kid", "k2"), claims()), proxy.ReasonUnknownKID},
		{"no kid", sign(priv, with(hdr(), "kid", nil), claims()), proxy.ReasonMalformed},
		{"jku header", sign(priv, with(hdr(), "jku", "https://evil/jwks"), claims()), proxy.ReasonMalformed},
		{"jwk header", sign(priv, with(hdr(), "jwk", map[string]string{"kty": "OKP"}), claims()), proxy.ReasonMalformed},
		{"x5u header", sign(priv, with(hdr(), "x5u", "https://evil/x"), claims()), proxy.ReasonMalformed},
		{"crit header", sign(priv, with(hdr(), "crit", []string{"exp"}), claims()), proxy.ReasonMalformed},
		{"expired", sign(priv, hdr(), with(with(claims(), "exp", now.Add(-time.Minute).Unix()), "iat", now.Add(-time.Hour).Unix())), proxy.ReasonExpired},
		{"nbf in the future", sign(priv, hdr(), with(claims(), "nbf", now.Add(time.Minute).Unix())), proxy.ReasonNotYetValid},
		{"iat in the future", sign(priv, hdr(), with(claims(), "iat", now.Add(time.Minute).Unix())), proxy.ReasonNotYetValid},
		{"no exp", sign(priv, hdr(), with(claims(), "exp", nil)), proxy.ReasonBadClaims},
		{"no iat", sign(priv, hdr(), with(claims(), "iat", nil)), proxy.ReasonBadClaims},
		{"no sub", sign(priv, hdr(), with(claims(), "sub", nil)), proxy.ReasonBadClaims},
		{"empty sub", sign(priv, hdr(), with(claims(), "sub", "")), proxy.ReasonBadClaims},
		{"sub with newline", sign(priv, hdr(), with(claims(), "sub", "a\nX-Admin: 1")), proxy.ReasonBadClaims},
		{"wrong iss", sign(priv, hdr(), with(claims(), "iss", "https://evil")), proxy.ReasonWrongIssuer},
		{"wrong aud", sign(priv, hdr(), with(claims(), "aud", "https://evil")), proxy.ReasonWrongAudience},
		{"lifetime too long", sign(priv, hdr(), with(claims(), "exp", now.Add(31*24*time.Hour).Unix())), proxy.ReasonBadClaims},
		{"JSON serialization", `{"payload":"` + parts[1] + `","protected":"` + parts[0] + `","signature":"` + parts[2] + `"}`, proxy.ReasonMalformed},
		{"two parts", parts[0] + "." + parts[1], proxy.ReasonMalformed},
		{"four parts", good + ".x", proxy.ReasonMalformed},
		{"padding", parts[0] + "." + parts[1] + "." + parts[2] + "==", proxy.ReasonMalformed},
		{"too long", sign(priv, hdr(), with(claims(), "pad", strings.Repeat("x", 5000))), proxy.ReasonMalformed},
		{"signature cut", parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-2], proxy.ReasonBadSignature},
		{"signature trailing bits changed", parts[0] + "." + parts[1] + "." + flipLast(parts[2]), proxy.ReasonMalformed},
		{"empty", "", proxy.ReasonMalformed},
		{"duplicate header member", signRaw(priv, `{"alg":"EdDSA","kid":"k2","kid":"k1"}`, fmt.Sprintf(`{"sub":"user-1","iat":%d,"exp":%d,"iss":%q,"aud":%q}`, now.Unix(), now.Add(time.Hour).Unix(), origin, origin)), proxy.ReasonMalformed},
		{"duplicate sub", signRaw(priv, `{"alg":"EdDSA","kid":"k1"}`, fmt.Sprintf(`{"sub":"admin","sub":"user-1","iat":%d,"exp":%d,"iss":%q,"aud":%q}`, now.Unix(), now.Add(time.Hour).Unix(), origin, origin)), proxy.ReasonMalformed},
		{"payload not JSON", signRaw(priv, `{"alg":"EdDSA","kid":"k1"}`, `not json`), proxy.ReasonMalformed},
		{"duplicate sub, one escaped", signRaw(priv, `{"alg":"EdDSA","kid":"k1"}`, fmt.Sprintf(`{"sub":"admin","s\u0075b":"user-1","iat":%d,"exp":%d,"iss":%q,"aud":%q}`, now.Unix(), now.Add(time.Hour).Unix(), origin, origin)), proxy.ReasonMalformed},
		{"exp beyond float64", signRaw(priv, `{"alg":"EdDSA","kid":"k1"}`, fmt.Sprintf(`{"sub":"user-1","iat":%d,"exp":1e400,"iss":%q,"aud":%q}`, now.Unix(), origin, origin)), proxy.ReasonMalformed},
	}
	return good, tests
}

func TestVerifierRefuses(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	_, otherPriv, _ := ed25519.GenerateKey(nil)
	now := time.Unix(1_800_000_000, 0)
	src := &staticKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}}
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{Source: src, Now: func() time.Time { return now }})
	if err := kc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := proxy.NewJWTVerifier(proxy.JWTVerifierOptions{
		Keys: kc, Issuer: origin, Audience: origin, Leeway: 30 * time.Second,
		MaxTTL: 30 * 24 * time.Hour, Now: func() time.Time { return now },
	})
	good, tests := hostileTokens(priv, otherPriv, pub, now)
	if c, err := v.Verify(context.Background(), good); err != nil || c.Subject != "user-1" {
		t.Fatalf("good token: got %+v %v", c, err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := v.Verify(context.Background(), tt.token)
			if err == nil {
				t.Fatalf("got %+v, want refused", c)
			}
			var ae *proxy.AuthError
			if !errors.As(err, &ae) || ae.Reason != tt.reason {
				t.Fatalf("got %v, want reason %s", err, tt.reason)
			}
		})
	}
	// Within leeway is accepted.
	skewed := sign(priv, map[string]any{"alg": "EdDSA", "kid": "k1"}, map[string]any{
		"sub": "user-1", "iat": now.Add(20 * time.Second).Unix(), "exp": now.Add(time.Hour).Unix(), "iss": origin, "aud": origin})
	if _, err := v.Verify(context.Background(), skewed); err != nil {
		t.Errorf("iat 20s ahead (leeway 30s): got %v, want accepted", err)
	}
}

func TestKeyCache(t *testing.T) {
	pub1, _, _ := ed25519.GenerateKey(nil)
	pub2, _, _ := ed25519.GenerateKey(nil)
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	src := &staticKeys{keys: []proxy.Key{{KID: "k1", Public: pub1}}}
	var refreshes []string
	var rmu sync.Mutex
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{Source: src, Now: clock, OnRefresh: func(tr, res string) {
		rmu.Lock()
		refreshes = append(refreshes, tr+"/"+res)
		rmu.Unlock()
	}})
	ctx := context.Background()
	if err := kc.Load(ctx); err != nil || kc.Len() != 1 {
		t.Fatalf("boot: %v, %d keys", err, kc.Len())
	}

	// A new key in the source is not asked for within the cooldown...
	src.set(func(s *staticKeys) { s.keys = append(s.keys, proxy.Key{KID: "k2", Public: pub2}) })
	if _, err := kc.Lookup(ctx, "k2"); !errors.Is(err, proxy.ErrUnknownKID) {
		t.Fatalf("within cooldown: got %v, want ErrUnknownKID", err)
	}
	if got := src.readCount(); got != 1 {
		t.Fatalf("within cooldown: %d reads, want 1 (boot)", got)
	}
	// ...and after it, one read serves every concurrent miss.
	advance(31 * time.Second)
	gate := make(chan struct{})
	src.set(func(s *staticKeys) { s.gate = gate })
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := kc.Lookup(ctx, "k2")
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond) // let the misses pile up on the one read
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent miss: %v", err)
		}
	}
	if got := src.readCount(); got != 2 {
		t.Fatalf("50 concurrent misses: %d reads in all, want 2", got)
	}
	src.set(func(s *staticKeys) { s.gate = nil })

	// A failed re-read keeps the old keys.
	src.set(func(s *staticKeys) { s.fail = true })
	advance(31 * time.Second)
	if _, err := kc.Lookup(ctx, "k3"); err == nil {
		t.Fatal("unknown kid with a failing source: got a key")
	}
	if _, err := kc.Lookup(ctx, "k1"); err != nil {
		t.Fatalf("after a failed read: %v, want the old key kept", err)
	}

	// Max age: a stale set is re-read in the background, and a key removed
	// from the source leaves the cache.
	src.set(func(s *staticKeys) { s.fail = false; s.keys = s.keys[1:] })
	advance(11 * time.Minute)
	kc.Lookup(ctx, "k1") // triggers the background read
	deadline := time.Now().Add(5 * time.Second)
	for kc.Len() != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := kc.Lookup(ctx, "k1"); !errors.Is(err, proxy.ErrUnknownKID) {
		t.Fatalf("after max-age refresh, removed key: got %v, want ErrUnknownKID", err)
	}
	// Add makes a key usable at once, with no read.
	reads := src.readCount()
	kc.Add(proxy.Key{KID: "k9", Public: pub1})
	if _, err := kc.Lookup(ctx, "k9"); err != nil || src.readCount() != reads {
		t.Fatalf("Add: got %v after %d reads, want the key with no read", err, src.readCount()-reads)
	}
	rmu.Lock()
	defer rmu.Unlock()
	want := map[string]bool{"boot/ok": true, "unknown_kid/skipped_cooldown": true, "unknown_kid/ok": true, "unknown_kid/error": true, "max_age/ok": true, "issuer/ok": true}
	for _, r := range refreshes {
		delete(want, r)
	}
	if len(want) != 0 {
		t.Errorf("refresh outcomes never observed: %v (saw %v)", want, refreshes)
	}
}

// flipLast changes the last base64url character so that only the unused
// trailing bits differ: a lenient decoder would accept the same signature.
func flipLast(s string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, s[len(s)-1])
	return s[:len(s)-1] + string(alphabet[i^1])
}

// TestHostileTokensEndToEnd sends every refused token through the running
// proxy: each gets 401 JSON and the upstream receives nothing.
func TestHostileTokensEndToEnd(t *testing.T) {
	s := newStack(t)
	pub, priv, _ := ed25519.GenerateKey(nil)
	_, otherPriv, _ := ed25519.GenerateKey(nil)
	s.keys.Add(proxy.Key{KID: "k1", Public: pub})
	good, tests := hostileTokens(priv, otherPriv, pub, s.clock.Now())
	if r := s.do("GET", "/api/tasks", nil, bearer(good)...); r.status != 200 {
		t.Fatalf("good token through the proxy: got %d %s", r.status, r.body)
	}
	s.up.take()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/api/tasks", "/api/admin/x", "/ws/chat?token=" + url.QueryEscape(tt.token)} {
				hdr := bearer(tt.token)
				if strings.HasPrefix(path, "/ws/") {
					hdr = nil
				}
				r := s.do("GET", path, nil, hdr...)
				if r.status != 401 || r.header.Get("Content-Type") != "application/json" {
					t.Errorf("%s: got %d %s, want 401 JSON", path, r.status, r.body)
				}
			}
			if got := s.up.take(); len(got) != 0 {
				t.Fatalf("upstream received %d requests", len(got))
			}
		})
	}
}
