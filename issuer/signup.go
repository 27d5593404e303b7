package issuer

import (
	"context"
	"errors"

	"net"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/authsidecar/authsidecar/mail"
)

const maxNameBytes = 256 // keeps every user's JWT well under 4 KiB

// signUp creates the user, its credential and a first session.
func (iss *Issuer) signUp(w http.ResponseWriter, r *http.Request) *apiError {
	if ok, wait := iss.signUpIP.allow(iss.clientIP(r)); !ok {
		return tooMany(w, wait)
	}
	f, apiErr := readFields(w, r, iss.bodyBytes, true)
	if apiErr != nil {
		return apiErr
	}
	name, _ := f.str("name", true)
	email, hasEmail := f.str("email", true)
	password, hasPw := f.str("password", true)
	image, hasImage := f.str("image", false)
	callback, hasCallback := f.str("callbackURL", false)
	remember := f.boolean("rememberMe", true)
	f.maxBytes("name", name, maxNameBytes)
	if hasEmail && !validEmail(email) {
		f.fail("email", "Invalid email address")
	}
	if hasPw && password == "" {
		f.fail("password", "Too small: expected string to have >=1 characters")
	}
	if apiErr := f.err(); apiErr != nil {
		return apiErr
	}
	if apiErr := iss.checkPasswordLength(password); apiErr != nil {
		return apiErr
	}
	if hasCallback && !iss.safeRedirect(callback) {
		return errInvalidCallback
	}
	email = strings.ToLower(email)
	if iss.rec.require {
		return iss.signUpUnverified(w, r, name, email, password, hasImage, image, callback)
	}

	// Refuse a taken email before paying for a hash; the insert below
	// still catches a race between two sign-ups.
	if _, _, err := iss.store.CredentialByEmail(r.Context(), email); err == nil {
		return errUserExists
	} else if !errors.Is(err, ErrNotFound) {
		return storeErr(err)
	}
	hash, err := iss.hasher.hash(r.Context(), password)
	if err != nil {
		return hashErr(w, err)
	}
	r, done := afterHash(r)
	defer done()
	u, err := iss.newUser(name, email, hasImage, image)
	if err != nil {
		return errInternal(err)
	}
	s, err := iss.newSession(r, u.ID, remember)
	if err != nil {
		return errInternal(err)
	}
	if err := iss.store.CreateUser(r.Context(), u, hash, s); err != nil {
		if errors.Is(err, ErrEmailTaken) {
			return errUserExists
		}
		return storeErr(err)
	}
	iss.setSessionCookie(w, s)
	writeJSON(w, http.StatusOK, struct {
		Token string   `json:"token"`
		User  userJSON `json:"user"`
	}{s.Token, toUserJSON(u)})
	return nil
}

func (iss *Issuer) newUser(name, email string, hasImage bool, image string) (User, error) {
	now := iss.now().UTC().Truncate(timeUnit)
	id, err := NewUserID()
	if err != nil {
		return User{}, err
	}
	u := User{ID: id, Name: name, Email: email, CreatedAt: now, UpdatedAt: now}
	if hasImage {
		u.Image = &image
	}
	return u, nil
}

// signUpUnverified is sign-up under require_email_verification: no
// session, a verification link mailed instead. A taken email gets the same
// answer, after the same hashing work, with a made-up user and no mail, as
// Better Auth answers: the caller learns nothing about the account.
func (iss *Issuer) signUpUnverified(w http.ResponseWriter, r *http.Request, name, email, password string, hasImage bool, image, callback string) *apiError {
	hash, err := iss.hasher.hash(r.Context(), password)
	if err != nil {
		return hashErr(w, err)
	}
	r, done := afterHash(r)
	defer done()
	u, err := iss.newUser(name, email, hasImage, image)
	if err != nil {
		return errInternal(err)
	}
	switch err := iss.store.CreateUser(r.Context(), u, hash, Session{}); {
	case errors.Is(err, ErrEmailTaken):
		// u, never stored, is the made-up user.
	case err != nil:
		return storeErr(err)
	default:
		// After the answer, as for request-password-reset: queueing inline
		// would make a new address slower to answer than a taken one.
		// When the backlog is full the link is not sent; the account
		// exists and the user can ask for the link again.
		if !iss.rec.intake.run(r.Context(), func(ctx context.Context) {
			if err := iss.queueLink(ctx, mail.EmailVerification, u, iss.verifyLink(callback)); err != nil {
				iss.log.Error("sign-up: verification mail not queued", "error", err.Error())
			}
		}) {
			iss.log.Warn("sign-up: verification mail not queued: intake backlog full", "user_id", u.ID)
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Token *string  `json:"token"`
		User  userJSON `json:"user"`
	}{nil, toUserJSON(u)})
	return nil
}

// checkPasswordLength counts characters, not bytes, as Better Auth does.
func (iss *Issuer) checkPasswordLength(pw string) *apiError {
	n := utf8.RuneCountInString(pw)
	switch {
	case n < iss.minPw:
		return errPasswordTooShort
	case n > iss.maxPw:
		return errPasswordTooLong
	}
	return nil
}

// peerIP is the TCP peer's address: without trusted proxies configured,
// X-Forwarded-For from the client is not evidence of anything.
func peerIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
