package issuer_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
)

// TestRotationPublishesBeforeSigning: a rotated-in key is in the JWKS at
// once but signs only once it has been published longer than the
// verifiers' unknown-kid cooldown, so a verifier that meets its kid may
// always fetch it; the old key signs until then, with no gap and no
// overlap.
func TestRotationPublishesBeforeSigning(t *testing.T) {
	const cooldown = 20 * time.Second
	e := newEnv(t, func(o *issuer.Options) { o.KeyCooldown = cooldown })
	cookie, _ := e.signUp("rot@example.com", pw)
	jwtOf := func() string {
		t.Helper()
		tok := e.getSession(cookie).header.Get("Set-Auth-Jwt")
		if tok == "" {
			t.Fatal("get-session issued no JWT")
		}
		return tok
	}
	oldKid := kidOf(t, jwtOf())
	rotatedAt := e.clock.Now()
	fresh, err := e.iss.RotateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if jwks := string(e.do(http.MethodGet, "/api/auth/jwks", "", "").body); !strings.Contains(jwks, fresh.KID) || !strings.Contains(jwks, oldKid) {
		t.Fatalf("JWKS right after the rotation: %s, want both %s and %s", jwks, oldKid, fresh.KID)
	}
	for _, at := range []time.Duration{0, time.Second, cooldown} {
		e.clock.Add(at - e.clock.Now().Sub(rotatedAt))
		tok := jwtOf()
		if kid := kidOf(t, tok); kid != oldKid {
			t.Fatalf("%v after the rotation: signed with %s, want the old key %s until the new one has been published longer than the cooldown", at, kid, oldKid)
		}
		verifyJWT(t, e, tok)
	}
	keys, err := issuer.InspectKeys(context.Background(), e.db, issuer.KeyView{Secret: []byte(testSecret), KeyCooldown: cooldown, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].KID != fresh.KID || keys[0].Signs || keys[0].SignsFrom.IsZero() || !keys[1].Signs {
		t.Fatalf("keys during publication: %+v, want the new one published ahead of signing and the old one signing", keys)
	}
	if from := keys[0].SignsFrom.Sub(rotatedAt); from <= cooldown || from > cooldown+10*time.Second {
		t.Errorf("the new key signs %v after the rotation, want more than the cooldown %v (and not much more)", from, cooldown)
	}
	// The switch is at one instant: the old key signs up to it, the new
	// one from it.
	e.clock.Add(keys[0].SignsFrom.Sub(e.clock.Now()) - time.Millisecond)
	if kid := kidOf(t, jwtOf()); kid != oldKid {
		t.Fatalf("just before the switch: signed with %s, want %s", kid, oldKid)
	}
	e.clock.Add(time.Millisecond)
	tok := jwtOf()
	if kid := kidOf(t, tok); kid != fresh.KID {
		t.Fatalf("at the switch: signed with %s, want the new key %s", kid, fresh.KID)
	}
	verifyJWT(t, e, tok)
	keys, _ = issuer.InspectKeys(context.Background(), e.db, issuer.KeyView{Secret: []byte(testSecret), KeyCooldown: cooldown, Now: e.clock.Now})
	if !keys[0].Signs || keys[1].Signs || !keys[1].Usable {
		t.Errorf("keys after the switch: %+v, want the new one signing, the old one verifying only", keys)
	}
}

// TestFirstKeySignsAtOnce: a key made because none could sign (first
// start, AUTH_SECRET rotated) signs at once: nobody holds an older one.
func TestFirstKeySignsAtOnce(t *testing.T) {
	e := newEnv(t, func(o *issuer.Options) { o.KeyCooldown = time.Hour })
	cookie, _ := e.signUp("first@example.com", pw)
	if tok := e.getSession(cookie).header.Get("Set-Auth-Jwt"); tok == "" {
		t.Fatal("the first key did not sign at once")
	}
	e.opts.Secret = []byte("a-completely-different-secret-of-enough-length")
	e.start()
	cookie, _ = e.signUp("second@example.com", pw)
	if tok := e.getSession(cookie).header.Get("Set-Auth-Jwt"); tok == "" {
		t.Fatal("the key made after AUTH_SECRET rotation did not sign at once")
	}
}
