package issuer_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/authsidecar/authsidecar/idp"
	"github.com/authsidecar/authsidecar/internal/oidctest"
	"github.com/authsidecar/authsidecar/issuer"
)

// TestSocialHostile is issue 21's hostile table: each case ends in a
// redirect with Better Auth's error code (never a 5xx, never a JSON
// page), stores no user, account or session, and leaves the flow unusable
// or, when another browser tried it, usable by the right one.
func TestSocialHostile(t *testing.T) {
	type tcase struct {
		name string
		// cfg changes the providers; before arms the stand-ins.
		cfg    func(map[string]*idp.Config)
		before func(se *socialEnv)
		// run returns the callback's answer.
		run  func(t *testing.T, se *socialEnv) resp
		code string
		// defaultURL: the error lands on /api/auth/error (no readable flow).
		defaultURL bool
	}
	googleFlow := func(t *testing.T, se *socialEnv) resp {
		return se.browser(t).flow("google", oidctest.User{}, nil)
	}
	idTokenCase := func(name string, mutate func(claims, header map[string]any), sign string) tcase {
		return tcase{name: name, code: "unable_to_get_user_info", run: googleFlow, before: func(se *socialEnv) {
			se.si.IDToken, se.si.Sign = mutate, sign
		}}
	}
	cases := []tcase{
		{name: "state missing", code: "state_not_found", defaultURL: true, run: func(t *testing.T, se *socialEnv) resp {
			return se.browser(t).callback(testBase + "/api/auth/callback/corp?code=abc")
		}},
		{name: "no query at all", code: "state_not_found", defaultURL: true, run: func(t *testing.T, se *socialEnv) resp {
			return se.browser(t).callback(testBase + "/api/auth/callback/corp")
		}},
		{name: "state unknown", code: "state_mismatch", defaultURL: true, run: func(t *testing.T, se *socialEnv) resp {
			return se.browser(t).callback(testBase + "/api/auth/callback/corp?code=abc&state=doesnotexist")
		}},
		{name: "state given twice", code: "invalid_callback_request", defaultURL: true, run: func(t *testing.T, se *socialEnv) resp {
			return se.browser(t).callback(testBase + "/api/auth/callback/corp?code=abc&state=a&state=b")
		}},
		{name: "state replayed", code: "state_mismatch", defaultURL: true, run: func(t *testing.T, se *socialEnv) resp {
			b := se.browser(t)
			cb := b.login(b.start(map[string]any{"provider": "corp", "errorCallbackURL": "/login-error"}), oidctest.Alice)
			location(t, b.callback(cb))
			se.rebase() // the first use signed in; the replay must add nothing
			return b.callback(cb)
		}},
		{name: "state expired", code: "state_mismatch", run: func(t *testing.T, se *socialEnv) resp {
			b := se.browser(t)
			cb := b.login(b.start(map[string]any{"provider": "corp", "errorCallbackURL": "/login-error"}), oidctest.Alice)
			se.clock.Add(11 * time.Minute)
			return b.callback(cb)
		}},
		{name: "state from another browser", code: "state_mismatch", run: func(t *testing.T, se *socialEnv) resp {
			victim := se.browser(t)
			cb := victim.login(victim.start(map[string]any{"provider": "corp", "errorCallbackURL": "/login-error"}), oidctest.Alice)
			r := se.browser(t).callback(cb)
			if se.count("oauth_state") != 1 {
				t.Errorf("the flow went with another browser's attempt; want it kept for its own")
			}
			return r
		}},
		{name: "state of another provider", code: "state_mismatch", run: func(t *testing.T, se *socialEnv) resp {
			b := se.browser(t)
			cb := b.login(b.start(map[string]any{"provider": "corp", "errorCallbackURL": "/login-error"}), oidctest.Alice)
			return b.callback(strings.Replace(cb, "/callback/corp", "/callback/google", 1))
		}},
		{name: "code replayed", code: "invalid_code", run: func(t *testing.T, se *socialEnv) resp {
			b := se.browser(t)
			cb := b.login(b.start(map[string]any{"provider": "corp"}), oidctest.Alice)
			location(t, b.callback(cb))
			se.rebase() // signed in; the next flow must add nothing
			b2 := se.browser(t)
			cb2 := b2.login(b2.start(map[string]any{"provider": "corp", "errorCallbackURL": "/login-error"}), oidctest.Alice)
			return b2.callback(withCode(t, cb2, cb))
		}},
		{name: "PKCE verifier wrong (a code of another flow)", code: "invalid_code", run: func(t *testing.T, se *socialEnv) resp {
			other := se.browser(t)
			otherCB := other.login(other.start(map[string]any{"provider": "corp"}), oidctest.Alice)
			b := se.browser(t)
			cb := b.login(b.start(map[string]any{"provider": "corp", "errorCallbackURL": "/login-error"}), oidctest.Alice)
			return b.callback(withCode(t, cb, otherCB))
		}},
		{name: "code tampered", code: "invalid_code", run: func(t *testing.T, se *socialEnv) resp {
			b := se.browser(t)
			cb := b.login(b.start(map[string]any{"provider": "corp", "errorCallbackURL": "/login-error"}), oidctest.Alice)
			return b.callback(withParam(t, cb, "code", "tampered"))
		}},
		{name: "no code", code: "no_code", run: func(t *testing.T, se *socialEnv) resp {
			b := se.browser(t)
			cb := b.login(b.start(map[string]any{"provider": "corp", "errorCallbackURL": "/login-error"}), oidctest.Alice)
			return b.callback(withParam(t, cb, "code", ""))
		}},
		{name: "provider said access_denied", code: "access_denied", run: func(t *testing.T, se *socialEnv) resp {
			b := se.browser(t)
			cb := b.login(b.start(map[string]any{"provider": "corp", "errorCallbackURL": "/login-error"}), oidctest.Alice)
			return b.callback(withParam(t, withParam(t, withParam(t, cb, "code", ""), "error", "access_denied"), "error_description", "End-User denied the request"))
		}},
		{name: "iss of another provider (RFC 9207)", code: "issuer_mismatch", run: func(t *testing.T, se *socialEnv) resp {
			b := se.browser(t)
			cb := b.login(b.start(map[string]any{"provider": "corp", "errorCallbackURL": "/login-error"}), oidctest.Alice)
			return b.callback(withParam(t, cb, "iss", "https://attacker.example"))
		}},
		idTokenCase("id token: wrong iss", func(c, _ map[string]any) { c["iss"] = "https://attacker.example" }, ""),
		idTokenCase("id token: wrong aud", func(c, _ map[string]any) { c["aud"] = "another-client" }, ""),
		idTokenCase("id token: wrong azp", func(c, _ map[string]any) { c["azp"] = "another-client" }, ""),
		idTokenCase("id token: several audiences, no azp", func(c, _ map[string]any) {
			c["aud"] = []any{c["aud"], "another-client"}
			delete(c, "azp")
		}, ""),
		idTokenCase("id token: wrong nonce", func(c, _ map[string]any) { c["nonce"] = "not-the-flows" }, ""),
		idTokenCase("id token: no nonce", func(c, _ map[string]any) { delete(c, "nonce") }, ""),
		idTokenCase("id token: expired", func(c, _ map[string]any) {
			c["iat"], c["exp"] = time.Now().Add(-2*time.Hour).Unix(), time.Now().Add(-time.Hour).Unix()
		}, ""),
		idTokenCase("id token: issued in the future", func(c, _ map[string]any) {
			c["iat"], c["exp"] = time.Now().Add(time.Hour).Unix(), time.Now().Add(2*time.Hour).Unix()
		}, ""),
		idTokenCase("id token: alg none", nil, "none"),
		idTokenCase("id token: HS256 keyed with the client secret", nil, "HS256"),
		idTokenCase("id token: unknown kid", nil, "unknown-kid"),
		{name: "unverified provider email of an existing user", code: "email_not_verified", run: googleFlow, before: func(se *socialEnv) {
			se.signUp("alice@example.com", "correct horse battery")
			se.rawDB(se.t.(*testing.T)).Exec(`UPDATE "user" SET email_verified = 1`)
			se.si.Google.EmailVerified = "false" // the string Better Auth once took for true
		}},
		{name: "allowed_email_domains", code: "unable_to_get_user_info", run: googleFlow, cfg: func(c map[string]*idp.Config) {
			c["google"].AllowedEmailDomains = []string{"corp.example"}
		}},
		{name: "required_claims", code: "unable_to_get_user_info", run: googleFlow, cfg: func(c map[string]*idp.Config) {
			c["google"].RequiredClaims = map[string][]string{"groups": {"staff"}}
		}, before: func(se *socialEnv) {
			se.si.IDToken = func(c, _ map[string]any) { c["groups"] = []any{"guests"} }
		}},
		{name: "allowed_organizations", code: "unable_to_get_user_info", cfg: func(c map[string]*idp.Config) {
			c["github"].AllowedOrganizations = []string{"acme"}
		}, before: func(se *socialEnv) { se.si.GitHub.Orgs = []string{"other-org"} }, run: func(t *testing.T, se *socialEnv) resp {
			return se.browser(t).flow("github", oidctest.User{}, nil)
		}},
		{name: "sign_up false", code: "signup_disabled", run: googleFlow, cfg: func(c map[string]*idp.Config) { c["google"].SignUp = false }},
		{name: "no email", code: "email_not_found", before: func(se *socialEnv) { se.si.GitHub.Emails = nil }, run: func(t *testing.T, se *socialEnv) resp {
			return se.browser(t).flow("github", oidctest.User{}, nil)
		}},
		{name: "token endpoint down (500)", code: "invalid_code", run: googleFlow, before: func(se *socialEnv) { se.si.TokenFault.Store("500") }},
		{name: "token endpoint slow", code: "invalid_code", run: googleFlow, before: func(se *socialEnv) { se.si.TokenFault.Store("slow") }},
		{name: "token endpoint answers 10 MB", code: "invalid_code", run: googleFlow, before: func(se *socialEnv) { se.si.TokenFault.Store("huge") }},
		{name: "token endpoint answers garbage", code: "invalid_code", run: googleFlow, before: func(se *socialEnv) { se.si.TokenFault.Store("garbage") }},
		{name: "token endpoint redirects", code: "invalid_code", run: googleFlow, before: func(se *socialEnv) { se.si.TokenFault.Store("redirect") }},
		{name: "GitHub bad code (200 with error)", code: "invalid_code", run: func(t *testing.T, se *socialEnv) resp {
			b := se.browser(t)
			cb := b.login(b.start(map[string]any{"provider": "github", "errorCallbackURL": "/login-error"}), oidctest.User{})
			return b.callback(withParam(t, cb, "code", "bad"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			se := newSocialEnv(t, tc.cfg)
			if tc.before != nil {
				se.env.t = t
				tc.before(se)
			}
			before := se.counts()
			r := tc.run(t, se)
			if se.baseline != nil {
				before = *se.baseline
			}
			if r.status >= 500 {
				t.Fatalf("got %d %s, want a redirect", r.status, r.body)
			}
			loc, code := location(t, r)
			if code != tc.code {
				t.Errorf("got Location %q, want error=%s", loc, tc.code)
			}
			wantPrefix := "/login-error?"
			if tc.defaultURL {
				wantPrefix = testBase + "/api/auth/error?"
			}
			if !strings.HasPrefix(loc, wantPrefix) {
				t.Errorf("got Location %q, want it on %s", loc, wantPrefix)
			}
			if len(r.body) != 0 {
				t.Errorf("got body %q, want none", r.body)
			}
			if got := se.counts(); got != before {
				t.Errorf("rows (user, account, session) changed: %v -> %v, want nothing stored", before, got)
			}
		})
	}
}

func withParam(t *testing.T, raw, key, value string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if value == "" {
		q.Del(key)
	} else {
		q.Set(key, value)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// withCode is cb with the code of other.
func withCode(t *testing.T, cb, other string) string {
	t.Helper()
	u, _ := url.Parse(other)
	return withParam(t, cb, "code", u.Query().Get("code"))
}

// TestSocialOpenRedirects: every callback URL of sign-in/social is held
// to the same rule as recovery's: a path, or a trusted origin; a refused
// one stores no flow.
func TestSocialOpenRedirects(t *testing.T) {
	se := newSocialEnv(t, nil)
	for _, field := range []struct{ name, code string }{
		{"callbackURL", "INVALID_CALLBACK_URL"}, {"errorCallbackURL", "INVALID_ERROR_CALLBACK_URL"}, {"newUserCallbackURL", "INVALID_NEW_USER_CALLBACK_URL"},
	} {
		for _, bad := range []string{"https://evil.example/x", "//evil.example/x", "/\\evil.example", "https:evil.example", "/%2F%2Fevil.example", "javascript:alert(1)", "http://localhost:8080@evil.example/"} {
			t.Run(field.name+" "+bad, func(t *testing.T) {
				r := se.browser(t).post("/api/auth/sign-in/social", map[string]any{"provider": "corp", field.name: bad})
				if r.status != http.StatusForbidden || r.code(t) != field.code {
					t.Errorf("got %d %s, want 403 %s", r.status, r.body, field.code)
				}
				if n := se.count("oauth_state"); n != 0 {
					t.Errorf("got %d flows stored, want none", n)
				}
			})
		}
	}
}

// TestSocialSignInRejects: sign-in/social's own errors, as Better Auth's.
func TestSocialSignInRejects(t *testing.T) {
	se := newSocialEnv(t, nil)
	b := se.browser(t)
	for _, tc := range []struct {
		name        string
		contentType string
		body        string
		hdr         []string
		status      int
		code        string
	}{
		{"unknown provider", "application/json", `{"provider":"nope"}`, nil, 404, "PROVIDER_NOT_FOUND"},
		{"no provider", "application/json", `{"callbackURL":"/x"}`, nil, 400, "VALIDATION_ERROR"},
		{"form body", "application/x-www-form-urlencoded", `provider=corp`, nil, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"reserved additionalParams", "application/json", `{"provider":"corp","additionalParams":{"state":"x"}}`, nil, 400, "VALIDATION_ERROR"},
		{"cookie without Origin", "application/json", `{"provider":"corp"}`, []string{"Cookie", "x=y"}, 403, "MISSING_OR_NULL_ORIGIN"},
		{"cross-site", "application/json", `{"provider":"corp"}`, []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"}, 403, "INVALID_ORIGIN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.send(http.MethodPost, testBase+"/api/auth/sign-in/social", tc.contentType, tc.body, tc.hdr...)
			if r.status != tc.status || r.code(t) != tc.code {
				t.Errorf("got %d %s, want %d %s", r.status, r.body, tc.status, tc.code)
			}
		})
	}
	if n := se.count("oauth_state"); n != 0 {
		t.Errorf("got %d flows stored, want none", n)
	}
}

// TestSocialMetrics: results are counted by provider, every series exists
// from the start, and ids nobody configured do not make series.
func TestSocialMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	se := newSocialEnv(t, nil, func(o *issuer.Options) { o.Registerer = reg })
	location(t, se.browser(t).flow("corp", oidctest.Alice, nil))
	se.si.TokenFault.Store("500")
	location(t, se.browser(t).flow("google", oidctest.User{}, nil))
	location(t, se.browser(t).callback(testBase+"/api/auth/callback/made-up-"+"id?state=x"))
	want := map[[2]string]float64{{"corp", "success"}: 1, {"google", "provider_unavailable"}: 1, {"github", "success"}: 0, {"github", "refused"}: 0, {"unknown", "state_invalid"}: 1}
	mfs, _ := reg.Gather()
	got := map[[2]string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "authsidecar_social_signins_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var k [2]string
			for _, l := range m.GetLabel() {
				if l.GetName() == "provider" {
					k[0] = l.GetValue()
				} else {
					k[1] = l.GetValue()
				}
			}
			got[k] = m.GetCounter().GetValue()
		}
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%v: got %v (present %v), want %v", k, g, ok, v)
		}
	}
	if n := testutil.CollectAndCount(reg, "authsidecar_social_signins_total"); n != 3*7+1 {
		t.Errorf("got %d series, want 7 per provider and one for unknown ids", n)
	}
}
