package issuer

import (
	"errors"

	"github.com/authsidecar/authsidecar/mail"
	"net/http"
	"strings"
	"time"
)

// timeUnit is the precision stored times keep (JavaScript's Date).
const timeUnit = time.Millisecond

// shortSessionTTL is a rememberMe:false session's lifetime (Better Auth's).
const shortSessionTTL = 24 * time.Hour

// signIn checks email and password and starts a cookie session. It returns
// no JWT: the client calls get-session next (docs/protocol.md).
func (iss *Issuer) signIn(w http.ResponseWriter, r *http.Request) *apiError {
	if ok, wait := iss.signInIP.allow(iss.clientIP(r)); !ok {
		return tooMany(w, wait)
	}
	f, apiErr := readFields(w, r, iss.bodyBytes, true)
	if apiErr != nil {
		return apiErr
	}
	email, _ := f.str("email", true)
	password, _ := f.str("password", true)
	callback, hasCallback := f.str("callbackURL", false)
	remember := f.boolean("rememberMe", true)
	if apiErr := f.err(); apiErr != nil {
		return apiErr
	}
	if !validEmail(email) {
		return errInvalidEmail
	}
	// Per email, whoever asks: slows guessing one account's password from
	// many addresses. Checked before any hashing, so it refuses the right
	// password too: a lock-out of the owner for as long as the guessing
	// lasts, counted apart (errLockedOut) so an operator sees it.
	if ok, wait, err := iss.signInMail.allow(r.Context(), strings.ToLower(email)); err != nil {
		return storeErr(err)
	} else if !ok {
		tooMany(w, wait)
		return errLockedOut
	}
	// Refused before hashing: a megabyte password must not buy scrypt time.
	if apiErr := iss.checkPasswordLength(password); apiErr == errPasswordTooLong {
		return apiErr
	}
	if hasCallback && !iss.safeRedirect(callback) {
		return errInvalidCallback
	}
	in := signInForm{email: strings.ToLower(email), password: password, callback: callback, hasCallback: hasCallback, remember: remember}
	u, hash, err := iss.store.CredentialByEmail(r.Context(), in.email)
	switch {
	case errors.Is(err, ErrNotFound) && iss.legacy != nil:
		return iss.signInLegacy(w, r, in)
	case errors.Is(err, ErrNotFound):
		return iss.unknownAddress(w, r, password)
	case err != nil:
		return storeErr(err)
	}
	return iss.signInAs(w, r, in, u, hash)
}

// signInForm is what a sign-in asked, checked: the email lower-cased.
type signInForm struct {
	email, password, callback string
	hasCallback, remember     bool
}

// unknownAddress answers a sign-in for an address no user has a password
// for: the same work as a real check, so timing does not reveal the
// account, and the same answer when no hashing slot is free.
func (iss *Issuer) unknownAddress(w http.ResponseWriter, r *http.Request, password string) *apiError {
	if _, err := iss.hasher.verify(r.Context(), password, iss.dummyHash); err != nil {
		return hashErr(w, err)
	}
	return errInvalidCredentials
}

// signInAs checks the password against u's stored hash and, if it is
// right, starts the session.
func (iss *Issuer) signInAs(w http.ResponseWriter, r *http.Request, in signInForm, u User, hash string) *apiError {
	ok, foreign, err := iss.checkStored(r.Context(), u.ID, in.password, hash)
	if err != nil {
		return hashErr(w, err)
	}
	var rehashed string
	if ok && foreign {
		rehashed = iss.rehash(r.Context(), u.ID, in.password)
	}
	r, done := afterHash(r)
	defer done()
	if !ok {
		return errInvalidCredentials
	}
	if apiErr := iss.refuseUnverified(r, in, u); apiErr != nil {
		return apiErr
	}
	if u.Ban.Active(iss.now()) {
		// After the password, as Better Auth's admin plugin does it: a
		// ban is no answer to a guess.
		iss.log.Info("sign-in refused: user banned", "user_id", u.ID)
		return errBanned
	}
	s, err := iss.newSession(r, u.ID, in.remember)
	if err != nil {
		return errInternal(err)
	}
	if err := iss.createSession(r.Context(), s, hash, rehashed); err != nil {
		return storeErr(err)
	}
	iss.answerSignIn(w, in, u, s)
	return nil
}

// refuseUnverified is errEmailNotVerified for a user whose password was
// right but whose address is not verified, under
// require_email_verification; nil otherwise.
func (iss *Issuer) refuseUnverified(r *http.Request, in signInForm, u User) *apiError {
	if !iss.rec.require || u.EmailVerified {
		return nil
	}
	// The password was right, so this is the user: a fresh link helps
	// them, if the operator wants it sent (Better Auth's sendOnSignIn).
	if iss.rec.sendOnLogin {
		if err := iss.queueLink(r.Context(), mail.EmailVerification, u, iss.verifyLink(in.callback)); err != nil {
			iss.log.Error("sign-in: verification mail not queued", "error", err.Error())
		}
	}
	return errEmailNotVerified
}

// answerSignIn sets the session cookie and writes Better Auth's sign-in
// answer.
func (iss *Issuer) answerSignIn(w http.ResponseWriter, in signInForm, u User, s Session) {
	iss.setSessionCookie(w, s)
	resp := struct {
		Redirect bool     `json:"redirect"`
		Token    string   `json:"token"`
		URL      string   `json:"url,omitempty"`
		User     userJSON `json:"user"`
	}{Token: s.Token, User: toUserJSON(u)}
	if in.hasCallback && in.callback != "" {
		resp.Redirect, resp.URL = true, in.callback
		w.Header().Set("Location", in.callback)
	}
	writeJSON(w, http.StatusOK, resp)
}
