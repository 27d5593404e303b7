package oidctest

import (
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// StandIn answers as Google's or GitHub's OAuth endpoints document:
// Google (developers.google.com/identity/openid-connect/openid-connect):
// /o/oauth2/v2/auth, /token (client_secret_post, PKCE, an RS256 id token
// with iss https://accounts.google.com), /oauth2/v3/certs, /v1/userinfo.
// GitHub (docs.github.com, "Authorizing OAuth apps", REST "Users"):
// /login/oauth/authorize, /login/oauth/access_token (a bad code is a 200
// with an error member; form-encoded unless JSON is asked for), and
// under /api: /user, /user/emails, /user/memberships/orgs/{org}.
//
// Its authorization endpoint signs the configured user in at once and
// redirects back with a code, as a provider does after its login page.
type StandIn struct {
	URL                    string
	ClientID, ClientSecret string
	// Google is the user the Google stand-in signs in; GitHub the GitHub
	// one. Change them between flows (under no concurrent flow).
	Google GoogleUser
	GitHub GitHubUser
	// TokenFault makes the token endpoint misbehave: "" (none), "500",
	// "slow" (waits SlowFor), "huge" (a 10 MB body), "garbage" (not a
	// token response), "redirect".
	TokenFault atomic.Value
	SlowFor    time.Duration
	// IDToken, when set, changes the claims and header of the next id
	// tokens, and Sign how they are signed: "" (RS256 with the
	// published key), "none", "HS256" (keyed with the client secret),
	// "unknown-kid" (RS256 with a key the JWKS does not hold).
	IDToken func(claims, header map[string]any)
	Sign    string

	key, other *rsa.PrivateKey
	kid        string
	mu         sync.Mutex
	codes      map[string]*grant
	tokens     map[string]bool
	refresh    map[string]bool
	// Hits counts requests by path.
	hits sync.Map
}

// GoogleUser is what Google's id token says.
type GoogleUser struct {
	Sub, Email, Name, Picture, HD string
	// EmailVerified is the claim's value as Google sends it: true, false,
	// or (as Google once did) the string "true" or "false".
	EmailVerified any
}

// GitHubUser is what GitHub's API says.
type GitHubUser struct {
	ID          int64
	Login, Name string
	// PublicEmail is the profile's public email (any of Emails, or not).
	PublicEmail string
	Emails      []GitHubEmail
	Orgs        []string
}

// GitHubEmail is one /user/emails entry.
type GitHubEmail struct {
	Email             string `json:"email"`
	Primary, Verified bool
}

type grant struct {
	challenge, redirectURI, nonce string
	used                          bool
}

// StartStandIn starts a stand-in for Google and GitHub on 127.0.0.1.
func StartStandIn(t testing.TB) *StandIn {
	t.Helper()
	s := &StandIn{ClientID: "standin-client", ClientSecret: "standin-secret", kid: "google-1",
		codes: map[string]*grant{}, tokens: map[string]bool{}, refresh: map[string]bool{}, SlowFor: 3 * time.Second,
		Google: GoogleUser{Sub: "1000001", Email: "alice@example.com", EmailVerified: true, Name: "Alice G", Picture: "https://example.com/a.png"},
		GitHub: GitHubUser{ID: 501, Login: "alice", Name: "Alice H", Emails: []GitHubEmail{{Email: "alice@example.com", Primary: true, Verified: true}}}}
	s.TokenFault.Store("")
	var err error
	if s.key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	if s.other, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /o/oauth2/v2/auth", s.authorize)
	mux.HandleFunc("GET /login/oauth/authorize", s.authorize)
	mux.HandleFunc("POST /token", s.token)
	mux.HandleFunc("POST /login/oauth/access_token", s.token)
	mux.HandleFunc("GET /oauth2/v3/certs", s.certs)
	mux.HandleFunc("GET /v1/userinfo", s.userinfo)
	mux.HandleFunc("GET /api/user", s.githubUser)
	mux.HandleFunc("GET /api/user/emails", s.githubEmails)
	mux.HandleFunc("GET /api/user/memberships/orgs/{org}", s.githubMembership)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := s.hits.LoadOrStore(r.URL.Path, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Hits returns how many requests reached path.
func (s *StandIn) Hits(path string) int64 {
	n, ok := s.hits.Load(path)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

func randomToken(prefix string) string {
	b := make([]byte, 24)
	rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

func (s *StandIn) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != s.ClientID || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	code := randomToken("code-")
	s.mu.Lock()
	s.codes[code] = &grant{challenge: q.Get("code_challenge"), redirectURI: q.Get("redirect_uri"), nonce: q.Get("nonce")}
	s.mu.Unlock()
	to, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	v := to.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	to.RawQuery = v.Encode()
	http.Redirect(w, r, to.String(), http.StatusFound)
}

func (s *StandIn) github(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/login/") }

// tokenError answers as each service does: GitHub with a 200.
func (s *StandIn) tokenError(w http.ResponseWriter, r *http.Request, code string) {
	status := http.StatusBadRequest
	if s.github(r) {
		status = http.StatusOK
		if code == "invalid_grant" {
			code = "bad_verification_code"
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": "refused by the stand-in"})
}

func (s *StandIn) token(w http.ResponseWriter, r *http.Request) {
	switch s.TokenFault.Load().(string) {
	case "500":
		http.Error(w, `{"error":"server_error"}`, http.StatusInternalServerError)
		return
	case "slow":
		select {
		case <-time.After(s.SlowFor):
		case <-r.Context().Done():
			return
		}
	case "huge":
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"access_token":"`))
		chunk := []byte(strings.Repeat("A", 64<<10))
		for range 160 { // 10 MB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		w.Write([]byte(`"}`))
		return
	case "garbage":
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("<html>not a token response</html>"))
		return
	case "redirect":
		http.Redirect(w, r, "http://127.0.0.1:1/elsewhere", http.StatusTemporaryRedirect)
		return
	}
	if err := r.ParseForm(); err != nil {
		s.tokenError(w, r, "invalid_request")
		return
	}
	if r.PostForm.Get("client_id") != s.ClientID || r.PostForm.Get("client_secret") != s.ClientSecret {
		s.tokenError(w, r, "invalid_client")
		return
	}
	refreshToken := ""
	nonce := ""
	switch r.PostForm.Get("grant_type") {
	case "refresh_token":
		s.mu.Lock()
		ok := s.refresh[r.PostForm.Get("refresh_token")]
		s.mu.Unlock()
		if !ok {
			s.tokenError(w, r, "invalid_grant")
			return
		}
	default:
		s.mu.Lock()
		g := s.codes[r.PostForm.Get("code")]
		valid := g != nil && !g.used
		if g != nil {
			g.used = true
		}
		s.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !valid || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge || r.PostForm.Get("redirect_uri") != g.redirectURI {
			s.tokenError(w, r, "invalid_grant")
			return
		}
		nonce = g.nonce
		refreshToken = randomToken("1//")
		s.mu.Lock()
		s.refresh[refreshToken] = true
		s.mu.Unlock()
	}
	access := randomToken("ya29.")
	if s.github(r) {
		access = randomToken("gho_")
		refreshToken = ""
	}
	s.mu.Lock()
	s.tokens[access] = true
	s.mu.Unlock()
	if s.github(r) {
		resp := url.Values{"access_token": {access}, "token_type": {"bearer"}, "scope": {"read:user,user:email"}}
		if strings.Contains(r.Header.Get("Accept"), "json") {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]string{"access_token": access, "token_type": "bearer", "scope": "read:user,user:email"})
			return
		}
		w.Header().Set("Content-Type", "application/x-www-form-urlencoded")
		w.Write([]byte(resp.Encode()))
		return
	}
	resp := map[string]any{"access_token": access, "expires_in": 3599, "token_type": "Bearer",
		"scope":    "openid https://www.googleapis.com/auth/userinfo.email https://www.googleapis.com/auth/userinfo.profile",
		"id_token": s.IDTokenFor(nonce)}
	if refreshToken != "" {
		resp["refresh_token"] = refreshToken
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

// IDTokenFor returns a Google id token for the configured user with
// nonce, through the IDToken and Sign switches.
func (s *StandIn) IDTokenFor(nonce string) string {
	now := time.Now()
	claims := map[string]any{"iss": "https://accounts.google.com", "azp": s.ClientID, "aud": s.ClientID, "sub": s.Google.Sub,
		"email": s.Google.Email, "email_verified": s.Google.EmailVerified, "name": s.Google.Name, "picture": s.Google.Picture,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	if s.Google.HD != "" {
		claims["hd"] = s.Google.HD
	}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	header := map[string]any{"alg": "RS256", "kid": s.kid, "typ": "JWT"}
	if s.IDToken != nil {
		s.IDToken(claims, header)
	}
	key := s.key
	switch s.Sign {
	case "none":
		header["alg"] = "none"
	case "HS256":
		header["alg"] = "HS256"
	case "unknown-kid":
		header["kid"], key = "rotated-away", s.other
	}
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	var sig []byte
	switch s.Sign {
	case "none":
	case "HS256":
		m := hmac.New(sha256.New, []byte(s.ClientSecret))
		m.Write([]byte(input))
		sig = m.Sum(nil)
	default:
		sum := sha256.Sum256([]byte(input))
		sig, _ = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func (s *StandIn) certs(w http.ResponseWriter, _ *http.Request) {
	pub := s.key.PublicKey
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]any{{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": s.kid,
		"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()), "e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes())}}})
}

// bearer checks the access token; false answers 401.
func (s *StandIn) bearer(w http.ResponseWriter, r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	valid := ok && s.tokens[tok]
	s.mu.Unlock()
	if !valid {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"message":"Bad credentials"}`))
	}
	return valid
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *StandIn) userinfo(w http.ResponseWriter, r *http.Request) {
	if s.bearer(w, r) {
		writeJSON(w, map[string]any{"sub": s.Google.Sub, "email": s.Google.Email, "email_verified": s.Google.EmailVerified, "name": s.Google.Name, "picture": s.Google.Picture})
	}
}

func (s *StandIn) githubUser(w http.ResponseWriter, r *http.Request) {
	if !s.bearer(w, r) {
		return
	}
	u := map[string]any{"id": s.GitHub.ID, "login": s.GitHub.Login, "name": s.GitHub.Name, "avatar_url": "https://avatars.example.com/u/" + strconv.FormatInt(s.GitHub.ID, 10)}
	u["email"] = nil
	if s.GitHub.PublicEmail != "" {
		u["email"] = s.GitHub.PublicEmail
	}
	writeJSON(w, u)
}

func (s *StandIn) githubEmails(w http.ResponseWriter, r *http.Request) {
	if !s.bearer(w, r) {
		return
	}
	out := make([]map[string]any, 0, len(s.GitHub.Emails))
	for _, e := range s.GitHub.Emails {
		out = append(out, map[string]any{"email": e.Email, "primary": e.Primary, "verified": e.Verified, "visibility": "private"})
	}
	writeJSON(w, out)
}

func (s *StandIn) githubMembership(w http.ResponseWriter, r *http.Request) {
	if !s.bearer(w, r) {
		return
	}
	org := r.PathValue("org")
	for _, o := range s.GitHub.Orgs {
		if strings.EqualFold(o, org) {
			writeJSON(w, map[string]any{"state": "active", "role": "member", "organization": map[string]any{"login": o}})
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprint(w, `{"message":"Not Found"}`)
}
