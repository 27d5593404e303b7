// Package demoidp is the small OpenID provider "authsidecar demo" starts
// beside the sidecar, so that "Sign in with a demo IdP" shows the whole
// redirect dance on one machine: discovery, an authorization endpoint
// whose login page asks for a name and an email (any; no password: it is
// a demo), a token endpoint (authorization code with PKCE S256 only),
// RS256 id tokens carrying the nonce, a JWKS, userinfo, and RFC 9207's
// iss on the way back. It holds everything in memory and is no
// production identity provider.
//
// It is ours rather than a dependency because it ships in the binary:
// github.com/zitadel/oidc's OP (which the tests use as the real provider)
// would bring a router, OpenTelemetry, a cookie library and a dozen other
// modules into every production build for the sake of the demo.
package demoidp

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"math/big"
	"net/http"
	"net/mail"
	"net/url"
	"strings"
	"sync"
	"time"
)

// maxTokens bounds the access tokens remembered for userinfo.
const maxTokens = 10000

// ClientID is the one client the demo provider knows (a public client:
// PKCE, no secret).
const ClientID = "authsidecar-demo"

// Provider is a running demo identity provider. Create it with New.
type Provider struct {
	issuer, redirectURI string
	key                 *rsa.PrivateKey
	kid                 string

	mu     sync.Mutex
	codes  map[string]*grant
	tokens map[string]claims // access token -> userinfo
}

type grant struct {
	challenge, nonce string
	user             claims
	expires          time.Time
}

type claims map[string]any

// New returns a provider whose issuer is the URL it will be served at
// and which sends codes only to redirectURI (the sidecar's callback).
func New(issuer, redirectURI string) (*Provider, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("demo idp key: %w", err)
	}
	return &Provider{issuer: strings.TrimSuffix(issuer, "/"), redirectURI: redirectURI, key: key, kid: "demo-1",
		codes: map[string]*grant{}, tokens: map[string]claims{}}, nil
}

// Handler serves the provider's endpoints.
func (p *Provider) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /authorize", p.loginPage)
	mux.HandleFunc("POST /authorize", p.login)
	mux.HandleFunc("POST /token", p.token)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("GET /userinfo", p.userinfo)
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, map[string]any{
		"issuer": p.issuer, "authorization_endpoint": p.issuer + "/authorize", "token_endpoint": p.issuer + "/token",
		"jwks_uri": p.issuer + "/jwks", "userinfo_endpoint": p.issuer + "/userinfo",
		"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"}, "code_challenge_methods_supported": []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"none"}, "scopes_supported": []string{"openid", "email", "profile"},
		"authorization_response_iss_parameter_supported": true,
	})
}

// authParams are the authorization request's parameters the login form
// carries through.
var authParams = []string{"client_id", "redirect_uri", "response_type", "state", "nonce", "code_challenge", "code_challenge_method", "scope", "login_hint"}

var page = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Demo IdP: sign in</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 28rem; margin: 4rem auto; padding: 0 1rem">
<h1>Demo IdP</h1>
<p>This identity provider runs inside <code>authsidecar demo</code>. Any name and email will do.</p>
{{if .Error}}<p role="alert" style="color: #b00">{{.Error}}</p>{{end}}
<form method="post" action="/authorize">
{{range $k, $v := .Params}}<input type="hidden" name="{{$k}}" value="{{$v}}">
{{end}}<p><label>Name<br><input id="name" name="name" value="{{.Name}}" maxlength="64" required></label></p>
<p><label>Email<br><input id="email" name="email" type="email" value="{{.Email}}" maxlength="254" required></label></p>
<p><button id="signin" type="submit">Sign in</button></p>
</form></body></html>
`))

// check validates an authorization request: the demo client, its
// redirect URI, the code flow with PKCE S256.
func (p *Provider) check(v url.Values) string {
	switch {
	case v.Get("client_id") != ClientID:
		return "unknown client_id"
	case v.Get("redirect_uri") != p.redirectURI:
		return "redirect_uri is not the registered one"
	case v.Get("response_type") != "code":
		return "response_type must be code"
	case v.Get("code_challenge_method") != "S256" || len(v.Get("code_challenge")) != 43:
		return "PKCE S256 is required"
	case v.Get("state") == "":
		return "state is required"
	}
	return ""
}

func (p *Provider) loginPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if msg := p.check(q); msg != "" {
		http.Error(w, "demo idp: "+msg, http.StatusBadRequest)
		return
	}
	p.render(w, q, "Demo User", orDefault(q.Get("login_hint"), "demo@example.com"), "")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (p *Provider) render(w http.ResponseWriter, q url.Values, name, email, msg string) {
	params := map[string]string{}
	for _, k := range authParams {
		if v := q.Get(k); v != "" {
			params[k] = v
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// No form-action: browsers apply it to the redirect that follows the
	// form, which goes to the sidecar, another origin.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	page.Execute(w, map[string]any{"Params": params, "Name": name, "Email": email, "Error": msg})
}

func random(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "demo idp: bad form", http.StatusBadRequest)
		return
	}
	f := r.PostForm
	if msg := p.check(f); msg != "" {
		http.Error(w, "demo idp: "+msg, http.StatusBadRequest)
		return
	}
	name, email := strings.TrimSpace(f.Get("name")), strings.ToLower(strings.TrimSpace(f.Get("email")))
	if a, err := mail.ParseAddress(email); err != nil || a.Address != email || len(name) == 0 || len(name) > 64 {
		p.render(w, f, name, email, "Enter a name and an email address.")
		return
	}
	sum := sha256.Sum256([]byte(email))
	user := claims{"sub": "demo-" + hex.EncodeToString(sum[:8]), "email": email, "email_verified": true, "name": name}
	code := random(24)
	p.mu.Lock()
	// Bounded: abandoned codes go once expired.
	for c, g := range p.codes {
		if time.Now().After(g.expires) {
			delete(p.codes, c)
		}
	}
	p.codes[code] = &grant{challenge: f.Get("code_challenge"), nonce: f.Get("nonce"), user: user, expires: time.Now().Add(time.Minute)}
	p.mu.Unlock()
	back, _ := url.Parse(p.redirectURI)
	q := back.Query()
	q.Set("code", code)
	q.Set("state", f.Get("state"))
	q.Set("iss", p.issuer)
	back.RawQuery = q.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func tokenError(w http.ResponseWriter, code string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": code})
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "authorization_code" {
		tokenError(w, "unsupported_grant_type")
		return
	}
	f := r.PostForm
	p.mu.Lock()
	g := p.codes[f.Get("code")]
	delete(p.codes, f.Get("code")) // single use
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(f.Get("code_verifier")))
	switch {
	case f.Get("client_id") != ClientID:
		tokenError(w, "invalid_client")
		return
	case g == nil || time.Now().After(g.expires) || f.Get("redirect_uri") != p.redirectURI ||
		subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(g.challenge)) != 1:
		tokenError(w, "invalid_grant")
		return
	}
	now := time.Now()
	c := claims{"iss": p.issuer, "aud": ClientID, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "auth_time": now.Unix()}
	for k, v := range g.user {
		c[k] = v
	}
	if g.nonce != "" {
		c["nonce"] = g.nonce
	}
	idToken, err := p.sign(c)
	if err != nil {
		http.Error(w, "demo idp: sign", http.StatusInternalServerError)
		return
	}
	access := random(24)
	p.mu.Lock()
	if len(p.tokens) >= maxTokens {
		clear(p.tokens) // a demo: old access tokens simply stop working
	}
	p.tokens[access] = g.user
	p.mu.Unlock()
	writeJSON(w, 200, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": 300, "id_token": idToken, "scope": "openid email profile"})
}

// sign makes an RS256 JWS of c.
func (p *Provider) sign(c claims) (string, error) {
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": p.kid})
	body, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(body)
	digest := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, p.key, crypto.SHA256, digest[:])
	if err != nil {
		return "", err
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

func (p *Provider) jwks(w http.ResponseWriter, _ *http.Request) {
	pub := p.key.PublicKey
	writeJSON(w, 200, map[string]any{"keys": []map[string]string{{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": p.kid,
		"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()), "e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes())}}})
}

func (p *Provider) userinfo(w http.ResponseWriter, r *http.Request) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	p.mu.Lock()
	u, ok := p.tokens[tok]
	p.mu.Unlock()
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_token"})
		return
	}
	writeJSON(w, 200, u)
}
