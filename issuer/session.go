package issuer

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
)

// SessionReader resolves session cookies to users and issues nothing: the
// issuer reads its sessions through one, and a verifier that shares the
// issuers' database serves cookie-only routes with another.
type SessionReader struct {
	store   Store
	cookies cookies
	now     func() time.Time
}

// SessionReaderOptions configures NewSessionReader with the issuers'
// settings; a cookie they set must read back here.
type SessionReaderOptions struct {
	// Store holds the sessions. Required.
	Store Store
	// Secret is the issuers' AUTH_SECRET, which signs the cookie. Required.
	Secret []byte
	// BaseURL: https means the "__Secure-" name prefix. Zero: http.
	BaseURL string
	// CookieName before any prefix. Zero: "auth.session_token".
	CookieName string
	// BetterAuthCookie is accepted beside the issuers' cookie, as they
	// accept it. Zero: none.
	BetterAuthCookie BetterAuthCookie
	// Now is the clock. Zero: time.Now.
	Now func() time.Time
}

// NewSessionReader returns a reader of the issuers' session cookies.
func NewSessionReader(o SessionReaderOptions) (*SessionReader, error) {
	if o.Store == nil || len(o.Secret) == 0 {
		return nil, errors.New("issuer: session reader needs a store and the secret")
	}
	if o.CookieName == "" {
		o.CookieName = "auth.session_token"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	https := strings.HasPrefix(o.BaseURL, "https://")
	name := o.CookieName
	if https {
		name = "__Secure-" + name
	}
	c := cookies{secret: o.Secret, name: name}.withBetterAuth(o.BetterAuthCookie, https)
	return &SessionReader{store: o.Store, cookies: c, now: o.Now}, nil
}

// lookup resolves the request's session cookie. found is false for no
// cookie, a bad signature, an unknown session or an expired one; stale
// reports a well-signed cookie that named no live session (the client
// should drop it). An expired session row is deleted when met, unless
// readOnly.
func (sr *SessionReader) lookup(ctx context.Context, r *http.Request, readOnly bool) (s Session, u User, found, stale bool, err error) {
	token, ok := sr.cookies.token(r)
	if !ok {
		return Session{}, User{}, false, false, nil
	}
	s, u, err = sr.store.SessionByToken(ctx, token)
	if errors.Is(err, ErrNotFound) {
		return Session{}, User{}, false, true, nil
	}
	if err != nil {
		return Session{}, User{}, false, false, err
	}
	// A banned user's session is no session (the ban ended them all; one a
	// sign-in created while the ban committed ends here), and a JWT is
	// minted only from a session found here.
	if !sr.now().Before(s.ExpiresAt) || u.Ban.Active(sr.now()) {
		if !readOnly {
			if err := sr.store.DeleteSession(ctx, token); err != nil {
				return Session{}, User{}, false, false, err
			}
		}
		return Session{}, User{}, false, true, nil
	}
	return s, u, true, false, nil
}

// SessionUserID resolves the request's session cookie to a user id, for
// the cookie-only routes the proxy serves: one session lookup, no writes.
// found is false when there is no live session.
func (sr *SessionReader) SessionUserID(ctx context.Context, r *http.Request) (string, bool, error) {
	_, u, found, _, err := sr.lookup(ctx, r, true)
	if err != nil || !found {
		return "", false, err
	}
	return u.ID, true, nil
}

// SessionUserID is the issuer's SessionReader's.
func (iss *Issuer) SessionUserID(ctx context.Context, r *http.Request) (string, bool, error) {
	return iss.sessions.SessionUserID(ctx, r)
}

// lookup is the issuer's SessionReader's.
func (iss *Issuer) lookup(ctx context.Context, r *http.Request, readOnly bool) (s Session, u User, found, stale bool, err error) {
	return iss.sessions.lookup(ctx, r, readOnly)
}

// CookieName is the session cookie's name as sent ("__Secure-" prefixed on
// https): the proxy strips it from forwarded requests.
func (iss *Issuer) CookieName() string { return iss.cookies.name }

// CookieName is the session cookie's name as sent.
func (sr *SessionReader) CookieName() string { return sr.cookies.name }

// CookieNames are the names of every session cookie accepted, as sent:
// the issuer's, and a Better Auth application's (BetterAuthCookie). The
// proxy strips them all from forwarded requests.
func (iss *Issuer) CookieNames() []string { return iss.cookies.names() }

// CookieNames are the names of every session cookie accepted, as sent.
func (sr *SessionReader) CookieNames() []string { return sr.cookies.names() }

// getSession returns {session, user} and, on GET and POST, a fresh JWT in
// the set-auth-jwt header: the second step of the two-step login. HEAD
// neither extends the session nor issues a JWT.
func (iss *Issuer) getSession(w http.ResponseWriter, r *http.Request) *apiError {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("Access-Control-Expose-Headers", "set-auth-jwt")
	head := r.Method == http.MethodHead
	if r.Method == http.MethodPost {
		// A body is optional, but when present it must be well-formed.
		if _, apiErr := readFields(w, r, iss.bodyBytes, false); apiErr != nil {
			return apiErr
		}
	}
	s, u, found, stale, err := iss.lookup(r.Context(), r, head)
	if err != nil {
		return storeErr(err)
	}
	if !found {
		if stale && !head {
			iss.cookies.clear(w)
		}
		writeJSON(w, http.StatusOK, nil)
		return nil
	}
	if !head {
		extended := false
		if s, extended, err = iss.maybeExtend(r.Context(), w, s); err != nil {
			return storeErr(err)
		}
		if _, betterAuth, _ := iss.cookies.tokenFrom(r); betterAuth {
			iss.adoptSession(w, s, extended)
		}
		jwt, apiErr := iss.issueJWT(r.Context(), u, s.ID)
		if apiErr != nil {
			return apiErr
		}
		h.Set("Set-Auth-Jwt", jwt)
	}
	writeJSON(w, http.StatusOK, struct {
		Session sessionJSON `json:"session"`
		User    userJSON    `json:"user"`
	}{toSessionJSON(s), toUserJSON(u)})
	return nil
}

// maybeExtend slides a remembered session's expiry once it is older than
// the update age, as Better Auth does, and re-sets the cookie to match;
// extended says it did.
func (iss *Issuer) maybeExtend(ctx context.Context, w http.ResponseWriter, s Session) (Session, bool, error) {
	now := iss.now().UTC().Truncate(timeUnit)
	if !s.Remember || s.ExpiresAt.Add(-iss.sessionTTL).Add(iss.updateAge).After(now) {
		return s, false, nil
	}
	exp := now.Add(iss.sessionTTL)
	if err := iss.store.ExtendSession(ctx, s.ID, exp, now); err != nil {
		return s, false, err
	}
	s.ExpiresAt, s.UpdatedAt = exp, now
	iss.setSessionCookie(w, s)
	return s, true, nil
}

// adoptSession moves a browser signed in with Better Auth's cookie onto
// ours, for the same session (imported with Better Auth's database):
// our cookie is set (unless extending set it already) and theirs is
// expired, so the next request carries ours alone. Where both have one
// name, ours replaces theirs.
func (iss *Issuer) adoptSession(w http.ResponseWriter, s Session, cookieSet bool) {
	if !cookieSet {
		iss.setSessionCookie(w, s)
	}
	if iss.cookies.ba != iss.cookies.name {
		iss.cookies.expire(w, iss.cookies.ba)
	}
}

// issueJWT signs a JWT for u, minted from the session sid, with the
// current signing key. It reads the key records (docs/protocol.md), which
// is how a key rotated by another process is picked up without a restart.
func (iss *Issuer) issueJWT(ctx context.Context, u User, sid string) (string, *apiError) {
	key, err := iss.keys.signingKey(ctx)
	if err != nil {
		return "", storeErr(err)
	}
	now := iss.now()
	jwt, err := signJWT(key, u, sid, iss.jwtIssuer, now, iss.issuedAt(u, now), iss.jwtTTL)
	if err != nil {
		return "", errInternal(err)
	}
	iss.metrics.jwts.Inc()
	return jwt, nil
}

// token is Better Auth's GET /token: the JWT in the body.
func (iss *Issuer) token(w http.ResponseWriter, r *http.Request) *apiError {
	w.Header().Set("Cache-Control", "no-store")
	s, u, found, _, err := iss.lookup(r.Context(), r, false)
	if err != nil {
		return storeErr(err)
	}
	if !found {
		return errUnauthorized
	}
	jwt, apiErr := iss.issueJWT(r.Context(), u, s.ID)
	if apiErr != nil {
		return apiErr
	}
	writeJSON(w, http.StatusOK, struct {
		Token string `json:"token"`
	}{jwt})
	return nil
}

// signOut deletes the session, revokes the JWTs minted from it (unless
// the operator keeps them: auth.revoke_jwt_on_sign_out) in the same
// transaction, and expires the cookie. The user's other sessions and
// their JWTs go on.
func (iss *Issuer) signOut(w http.ResponseWriter, r *http.Request) *apiError {
	if _, apiErr := readFields(w, r, iss.bodyBytes, false); apiErr != nil {
		return apiErr
	}
	if token, ok := iss.cookies.token(r); ok {
		if _, err := iss.store.EndSession(r.Context(), token, "", !iss.acct.KeepJWTsOnSignOut, iss.stamp()); err != nil {
			return storeErr(err)
		}
	}
	iss.cookies.clear(w)
	writeJSON(w, http.StatusOK, struct {
		Success bool `json:"success"`
	}{true})
	return nil
}

// ok is a liveness answer under /api/auth, as Better Auth has.
func (iss *Issuer) ok(w http.ResponseWriter, r *http.Request) *apiError {
	writeJSON(w, http.StatusOK, struct {
		OK bool `json:"ok"`
	}{true})
	return nil
}

// newSession makes (but does not store) a session for userID.
func (iss *Issuer) newSession(r *http.Request, userID string, remember bool) (Session, error) {
	now := iss.now().UTC().Truncate(timeUnit)
	id, err := newID()
	if err != nil {
		return Session{}, err
	}
	token, err := newID()
	if err != nil {
		return Session{}, err
	}
	ttl := iss.sessionTTL
	if !remember && ttl > shortSessionTTL {
		ttl = shortSessionTTL
	}
	return Session{
		ID: id, Token: token, UserID: userID,
		ExpiresAt: now.Add(ttl), CreatedAt: now, UpdatedAt: now,
		IPAddress: iss.clientIP(r), UserAgent: truncate(r.UserAgent(), 512),
		Remember: remember,
	}, nil
}

// setSessionCookie writes the cookie for s: persistent unless the user
// asked not to be remembered.
func (iss *Issuer) setSessionCookie(w http.ResponseWriter, s Session) {
	maxAge := s.ExpiresAt.Sub(s.UpdatedAt) // set when the expiry was last moved
	if !s.Remember {
		maxAge = 0
	}
	iss.cookies.set(w, s.Token, maxAge)
}
