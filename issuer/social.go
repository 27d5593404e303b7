package issuer

// Sign-in with identity providers, on Better Auth 1.7's wire
// (shared/reference/better-auth-social.md): POST sign-in/social starts a
// flow (or, with idToken, signs in at once), the provider sends the
// browser back to GET (or form_post POST) callback/{id}, which signs the
// user in or links the provider account. The flow is stored, sealed,
// keyed by the SHA-256 of its state, for 10 minutes, and spent by the
// callback before it acts; the browser that started it holds the state
// in a signed cookie, and only it can finish the flow.

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/internal/seal"
)

// flowTTL is how long a flow may take, from sign-in/social to callback.
const flowTTL = 10 * time.Minute

// Sealing purposes: each its own key derived from AUTH_SECRET.
const (
	tokensPurpose = "authsidecar account tokens v1"
	flowPurpose   = "authsidecar oauth state v1"
)

// social is the issuer's identity-provider state shared by every Reload
// copy: the store, the sealing keys and the state cookie.
type social struct {
	accounts AccountStore // nil when the store is not one
	tokens   *seal.Key
	flows    *seal.Key
	cookie   string // the state cookie's name as sent
}

func newSocial(store Store, secret []byte, sessionCookie string) (*social, error) {
	tokens, err := seal.New(secret, tokensPurpose)
	if err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	flows, err := seal.New(secret, flowPurpose)
	if err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	as, _ := store.(AccountStore)
	// Better Auth's cookie prefix: the session cookie's name up to its
	// first dot ("auth" of "auth.session_token"), "__Secure-" kept.
	prefix, _, _ := strings.Cut(sessionCookie, ".")
	return &social{accounts: as, tokens: tokens, flows: flows, cookie: prefix + ".state"}, nil
}

// setProviders installs the providers a New or Reload was given.
func (iss *Issuer) setProviders(ps []Provider) error {
	iss.providers = make(map[string]Provider, len(ps))
	for _, p := range ps {
		if _, dup := iss.providers[p.ID()]; dup || p.ID() == "" || p.ID() == credentialProvider {
			return fmt.Errorf("issuer: identity provider id %q is empty, reserved or repeated", p.ID())
		}
		iss.providers[p.ID()] = p
		iss.metrics.precreateSocial(p.ID())
	}
	if len(ps) > 0 && iss.social.accounts == nil {
		return errors.New("issuer: identity providers need a store that keeps provider accounts (AccountStore)")
	}
	return nil
}

// flow is what a stored state holds, sealed.
type flow struct {
	ProviderID    string    `json:"p"`
	Verifier      string    `json:"v"`
	Nonce         string    `json:"n,omitempty"`
	CallbackURL   string    `json:"c,omitempty"`
	ErrorURL      string    `json:"e,omitempty"`
	NewUserURL    string    `json:"u,omitempty"`
	RequestSignUp bool      `json:"r,omitempty"`
	Link          *flowLink `json:"l,omitempty"`
	ExpiresAt     int64     `json:"x"` // Unix ms
}

// flowLink is the session a link-social flow adds the account to: the
// callback requires it still live and the same user's.
type flowLink struct {
	UserID       string `json:"u"`
	SessionToken string `json:"t"`
}

func stateHash(state string) [32]byte { return sha256.Sum256([]byte(state)) }

func (sc *social) sealFlow(hash [32]byte, f flow) ([]byte, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return sc.flows.Seal(b, hash[:])
}

func (sc *social) openFlow(st OAuthState) (flow, error) {
	b, err := sc.flows.Open(st.Sealed, st.Hash[:])
	if err != nil {
		return flow{}, err
	}
	var f flow
	if err := json.Unmarshal(b, &f); err != nil {
		return flow{}, fmt.Errorf("oauth state: %w", err)
	}
	return f, nil
}

// sealToken seals one provider token for the account row id and column;
// an empty token stays empty (NULL).
func (sc *social) sealToken(accountID, column, tok string) ([]byte, error) {
	if tok == "" {
		return nil, nil
	}
	return sc.tokens.Seal([]byte(tok), []byte(accountID+"\x00"+column))
}

func (sc *social) openToken(accountID, column string, sealed []byte) (string, error) {
	if len(sealed) == 0 {
		return "", nil
	}
	b, err := sc.tokens.Open(sealed, []byte(accountID+"\x00"+column))
	return string(b), err
}

// withTokens returns a with t's tokens sealed into it.
func (sc *social) withTokens(a Account, t ProviderTokens) (Account, error) {
	var err error
	if a.AccessToken, err = sc.sealToken(a.ID, "access_token", t.AccessToken); err != nil {
		return a, err
	}
	if a.RefreshToken, err = sc.sealToken(a.ID, "refresh_token", t.RefreshToken); err != nil {
		return a, err
	}
	if a.IDToken, err = sc.sealToken(a.ID, "id_token", t.IDToken); err != nil {
		return a, err
	}
	a.AccessTokenExpiresAt = t.AccessTokenExpiresAt.UTC().Truncate(timeUnit)
	a.RefreshTokenExpiresAt = t.RefreshTokenExpiresAt.UTC().Truncate(timeUnit)
	return a, nil
}

// stateCookie sets (maxAge > 0) or expires the state cookie: SameSite=Lax
// whatever the session cookie's, since the provider's redirect back is a
// top-level navigation from another site.
func (iss *Issuer) stateCookie(w http.ResponseWriter, state string, maxAge time.Duration) {
	c := &http.Cookie{Name: iss.social.cookie, Path: "/", HttpOnly: true, Secure: iss.cookies.secure, SameSite: http.SameSiteLaxMode, MaxAge: -1}
	if maxAge > 0 {
		c.Value, c.MaxAge = signCookieValue(iss.cookies.secret, state), int(maxAge/time.Second)
	}
	http.SetCookie(w, c)
}

// cookieState is the state of the request's signed state cookie.
func (iss *Issuer) cookieState(r *http.Request) (string, bool) {
	for _, ck := range r.CookiesNamed(iss.social.cookie) {
		if s, ok := parseCookieValue(iss.cookies.secret, ck.Value); ok {
			return s, true
		}
	}
	return "", false
}

// redirectURI is the callback registered at the provider: Better Auth's
// {baseURL}/api/auth/callback/{id}.
func (iss *Issuer) redirectURI(providerID string) string {
	return iss.origin + BasePath + "/callback/" + providerID
}

var (
	errProviderNotFound     = &apiError{status: http.StatusNotFound, code: "PROVIDER_NOT_FOUND", message: "Provider not found"}
	errInvalidErrorCallback = &apiError{status: http.StatusForbidden, code: "INVALID_ERROR_CALLBACK_URL", message: "Invalid errorCallbackURL"}
	errInvalidNewUserCB     = &apiError{status: http.StatusForbidden, code: "INVALID_NEW_USER_CALLBACK_URL", message: "Invalid newUserCallbackURL"}
	errIDTokenNotSupported  = &apiError{status: http.StatusNotFound, code: "ID_TOKEN_NOT_SUPPORTED", message: "id_token not supported"}
	errInvalidIDToken       = &apiError{status: http.StatusUnauthorized, code: "INVALID_TOKEN", message: "Invalid token"}
	errFailedUserInfo       = &apiError{status: http.StatusUnauthorized, code: "FAILED_TO_GET_USER_INFO", message: "Failed to get user info"}
	errUserEmailNotFound    = &apiError{status: http.StatusUnauthorized, code: "USER_EMAIL_NOT_FOUND", message: "User email not found"}
	errProviderDown         = &apiError{status: http.StatusServiceUnavailable, code: "SERVICE_UNAVAILABLE", message: "Identity provider unavailable"}
	// Better Auth's code for an unverified address, with what to do.
	errLinkNeedsVerifiedEmail = &apiError{status: http.StatusForbidden, code: "EMAIL_NOT_VERIFIED", message: "Verify your email address before linking an account"}
	errReservedAuthParameter  = errBadRequest("VALIDATION_ERROR", "[body.additionalParams] additionalParams cannot include reserved OAuth parameters: state, client_id, redirect_uri, response_type, code_challenge, code_challenge_method, nonce, scope")
)

// socialRequest is sign-in/social's and link-social's body.
type socialRequest struct {
	provider                     Provider
	callback, errorURL, newUser  string
	disableRedirect, requestSign bool
	scopes                       []string
	loginHint                    string
	idToken                      *idTokenBody
}

// idTokenBody is the idToken member: a token the client already holds.
type idTokenBody struct {
	Token        string `json:"token"`
	Nonce        string `json:"nonce"`
	AccessToken  string `json:"accessToken"`
	RefreshToken string `json:"refreshToken"`
}

// readSocial reads and checks the body, in Better Auth's order: schema,
// provider, callback URLs.
func (iss *Issuer) readSocial(w http.ResponseWriter, r *http.Request) (socialRequest, *apiError) {
	var q socialRequest
	f, apiErr := readFields(w, r, iss.bodyBytes, false)
	if apiErr != nil {
		return q, apiErr
	}
	id, _ := f.str("provider", true)
	q.callback, _ = f.str("callbackURL", false)
	q.errorURL, _ = f.str("errorCallbackURL", false)
	q.newUser, _ = f.str("newUserCallbackURL", false)
	q.disableRedirect = f.boolean("disableRedirect", false)
	q.requestSign = f.boolean("requestSignUp", false)
	q.loginHint, _ = f.str("loginHint", false)
	q.scopes = f.strings("scopes")
	f.maxBytes("loginHint", q.loginHint, 320)
	var params map[string]json.RawMessage
	f.object("additionalParams", &params)
	var tok idTokenBody
	if f.object("idToken", &tok) {
		if tok.Token == "" {
			f.fail("idToken.token", "Invalid input: expected string, received undefined")
		}
		q.idToken = &tok
	}
	if apiErr := f.err(); apiErr != nil {
		return q, apiErr
	}
	for k := range params {
		switch k {
		case "state", "client_id", "redirect_uri", "response_type", "code_challenge", "code_challenge_method", "nonce", "scope":
			return q, errReservedAuthParameter
		}
	}
	if q.provider = iss.providers[id]; q.provider == nil {
		return q, errProviderNotFound
	}
	switch {
	case !iss.safeRedirect(q.callback):
		return q, errInvalidCallback
	case !iss.safeRedirect(q.errorURL):
		return q, errInvalidErrorCallback
	case !iss.safeRedirect(q.newUser):
		return q, errInvalidNewUserCB
	}
	return q, nil
}

// signInSocial is POST /sign-in/social: a redirect flow, or with idToken
// a sign-in at once.
func (iss *Issuer) signInSocial(w http.ResponseWriter, r *http.Request) *apiError {
	if ok, wait := iss.signInIP.allow(iss.clientIP(r)); !ok {
		return tooMany(w, wait)
	}
	q, apiErr := iss.readSocial(w, r)
	if apiErr != nil {
		return apiErr
	}
	if q.idToken != nil {
		return iss.signInIDToken(w, r, q)
	}
	return iss.startFlow(w, r, q, nil)
}

// linkSocial is POST /link-social: a flow that adds the provider account
// to the signed-in user instead of signing in.
func (iss *Issuer) linkSocial(w http.ResponseWriter, r *http.Request) *apiError {
	s, u, found, _, err := iss.lookup(r.Context(), r, false)
	if err != nil {
		return storeErr(err)
	}
	if !found {
		return errUnauthorized
	}
	q, apiErr := iss.readSocial(w, r)
	if apiErr != nil {
		return apiErr
	}
	if !u.EmailVerified {
		// link refuses it too; said here before the provider is involved.
		iss.log.Info("link-social refused: the user's email is not verified", "user_id", u.ID, "provider", q.provider.ID())
		return errLinkNeedsVerifiedEmail
	}
	if q.idToken != nil {
		return iss.linkIDToken(w, r, q, u)
	}
	return iss.startFlow(w, r, q, &flowLink{UserID: s.UserID, SessionToken: s.Token})
}

// startFlow stores a new flow and answers Better Auth's
// 200 {url, redirect} with Location and the state cookie.
func (iss *Issuer) startFlow(w http.ResponseWriter, r *http.Request, q socialRequest, link *flowLink) *apiError {
	ctx := r.Context()
	state, err := newID()
	if err != nil {
		return errInternal(err)
	}
	v1, err1 := newID()
	v2, err2 := newID()
	if err := errors.Join(err1, err2); err != nil {
		return errInternal(err)
	}
	f := flow{ProviderID: q.provider.ID(), Verifier: v1 + v2, CallbackURL: q.callback, ErrorURL: q.errorURL,
		NewUserURL: q.newUser, RequestSignUp: q.requestSign, Link: link}
	if q.provider.UsesNonce() {
		if f.Nonce, err = newID(); err != nil {
			return errInternal(err)
		}
	}
	u, err := q.provider.AuthCodeURL(ctx, AuthRequest{State: state, Nonce: f.Nonce, Verifier: f.Verifier,
		RedirectURI: iss.redirectURI(f.ProviderID), Scopes: q.scopes, LoginHint: q.loginHint})
	if err != nil {
		// Better Auth answers so while a provider's discovery fails; the
		// cause goes to the log.
		iss.log.Warn("sign-in with an identity provider not started", "provider", f.ProviderID, "error", err.Error())
		return errProviderNotFound
	}
	now := iss.now().UTC().Truncate(timeUnit)
	f.ExpiresAt = now.Add(flowTTL).UnixMilli()
	hash := stateHash(state)
	sealed, err := iss.social.sealFlow(hash, f)
	if err != nil {
		return errInternal(err)
	}
	if err := iss.social.accounts.SaveOAuthState(ctx, OAuthState{Hash: hash, ProviderID: f.ProviderID, Sealed: sealed,
		ExpiresAt: now.Add(flowTTL), CreatedAt: now}); err != nil {
		return storeErr(err)
	}
	iss.stateCookie(w, state, flowTTL)
	if !q.disableRedirect {
		w.Header().Set("Location", u)
	}
	writeJSON(w, http.StatusOK, struct {
		URL      string `json:"url"`
		Redirect bool   `json:"redirect"`
	}{u, !q.disableRedirect})
	return nil
}
