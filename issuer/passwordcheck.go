package issuer

import (
	"errors"
	"net/http"
)

// checkPassword is how a handler checks the current password of a
// signed-in user (change-password; delete-user with a password; any later
// endpoint that asks for it): every such endpoint calls it, so none is an
// unthrottled guessing oracle for whoever holds a stolen cookie, and none
// can fill the hashing queue. It spends one try from the password-check
// budgets, per client IP (limits.password_check_per_ip, in this process)
// and per user (limits.password_check_per_user, in the store, so replicas
// share it), before any hashing: 429 with Retry-After beyond either. The
// hash then waits in the client's own turn (hashSlots). It returns nil
// when password is the user's, errInvalidPassword when it is not,
// errNoCredential (400 CREDENTIAL_ACCOUNT_NOT_FOUND, as Better Auth) when
// the user has no password (signed up with an identity provider).
func (iss *Issuer) checkPassword(w http.ResponseWriter, r *http.Request, userID, password string) *apiError {
	if ok, wait := iss.pwCheckIP.allow(iss.clientIP(r)); !ok {
		return tooMany(w, wait)
	}
	if ok, wait, err := iss.pwCheckUser.allow(r.Context(), userID); err != nil {
		return storeErr(err)
	} else if !ok {
		return tooMany(w, wait)
	}
	// Refused before hashing: a megabyte password must not buy scrypt time.
	if len(password) > 4*iss.maxPw {
		return errInvalidPassword
	}
	hash, err := iss.store.PasswordHash(r.Context(), userID)
	if errors.Is(err, ErrNotFound) {
		return errNoCredential
	}
	if err != nil {
		return storeErr(err)
	}
	ok, _, err := iss.checkStored(r.Context(), userID, password, hash)
	if err != nil {
		return hashErr(w, err)
	}
	if !ok {
		return errInvalidPassword
	}
	return nil
}
