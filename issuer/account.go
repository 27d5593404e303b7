package issuer

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/mail"
	"github.com/authsidecar/authsidecar/revocation"
)

// The endpoints a signed-in user controls their account with, in Better
// Auth 1.7's shapes (docs/revocation.md lists where they differ):
// update-user, change-email and delete-user. The session endpoints are in
// sessions.go, change-password in changepassword.go.

// AccountOptions configures what users may do with their sessions and
// account, and how a revocation reaches their JWTs. The zero value is the
// default: sign-out revokes its session's JWTs; delete-user is off.
type AccountOptions struct {
	// Cutoffs reads the revocations in force (the process's revocation
	// set; revocation.Set implements it): a JWT minted within a second
	// after a cutoff that left its session alive (a change of password)
	// is stamped past it, so it is not taken with the old ones even when
	// both fall in one millisecond. Zero: none read.
	Cutoffs interface{ Cutoff(userKey uint64) int64 }
	// KeepJWTsOnSignOut leaves the JWTs minted from a signed-out session
	// valid until they expire. Zero: sign-out revokes them
	// (auth.revoke_jwt_on_sign_out).
	KeepJWTsOnSignOut bool
	// AllowDeleteUser serves delete-user (auth.allow_delete_user). Zero:
	// it answers 404, as Better Auth does without deleteUser.enabled.
	AllowDeleteUser bool
}

// KindChangeEmail is the recovery token of a change of address: mailed
// (as an email verification) to the new address, it moves the user to it
// when followed. Its Email is the new address.
const KindChangeEmail mail.Kind = "change_email"

var (
	errReauthenticate   = errBadRequest("SESSION_EXPIRED", "Session expired. Re-authenticate to perform this action.")
	errNoCredential     = errBadRequest("CREDENTIAL_ACCOUNT_NOT_FOUND", "Credential account not found")
	errEmailNotEditable = errBadRequest("EMAIL_CAN_NOT_BE_UPDATED", "Email can not be updated")
	errNoFields         = errBadRequest("NO_FIELDS_TO_UPDATE", "No fields to update")
	errSameEmail        = errBadRequest("EMAIL_IS_THE_SAME", "Email is the same")
	errEmailLinked      = errBadRequest("EMAIL_CAN_NOT_BE_UPDATED", "Email can not be updated while an identity provider account is linked: unlink it first")
	errNoDeleteToken    = &apiError{status: http.StatusNotFound, code: "INVALID_TOKEN", message: "Invalid token"}
	errBanned           = &apiError{status: http.StatusForbidden, code: "BANNED_USER",
		message: "You have been banned from this application. Please contact support if you believe this is an error."}
)

// signedIn resolves the cookie session of an endpoint that needs one
// (Better Auth's sessionMiddleware): 401 UNAUTHORIZED without. ServeHTTP
// has already refused a cookie-bearing POST from an untrusted origin.
func (iss *Issuer) signedIn(r *http.Request) (Session, User, *apiError) {
	s, u, found, _, err := iss.lookup(r.Context(), r, false)
	if err != nil {
		return Session{}, User{}, storeErr(err)
	}
	if !found {
		return Session{}, User{}, errUnauthorized
	}
	return s, u, nil
}

func (iss *Issuer) fresh(s Session) bool { return iss.now().Sub(s.CreatedAt) < freshAge }

// issuedAt is the issue time a JWT for u minted at now carries to the
// millisecond (iat_ms): now, or one past a cutoff covering u's tokens
// when that falls in the same second, so the cutoff cannot take a token
// minted after it from a session it left alive. A cutoff further ahead
// (a writer whose clock runs fast) is not followed: the token then falls
// under it, which errs toward revoking.
func (iss *Issuer) issuedAt(u User, now time.Time) time.Time {
	if iss.acct.Cutoffs == nil {
		return now
	}
	cut, t := iss.acct.Cutoffs.Cutoff(revocation.UserKey(u.ID)), now.UnixMilli()
	if cut >= t && cut-t < 1000 {
		return time.UnixMilli(cut + 1)
	}
	return now
}

// stamp is now to the millisecond, as stored and as revocations compare.
func (iss *Issuer) stamp() time.Time { return iss.now().UTC().Truncate(timeUnit) }

// updateUser sets the name and the image ({name?, image?}; image null
// clears it). The address has its own endpoint.
func (iss *Issuer) updateUser(w http.ResponseWriter, r *http.Request) *apiError {
	f, apiErr := readFields(w, r, iss.bodyBytes, false)
	if apiErr != nil {
		return apiErr
	}
	_, u, apiErr := iss.signedIn(r)
	if apiErr != nil {
		return apiErr
	}
	if raw, ok := f.m["email"]; ok && string(raw) != "null" {
		return errEmailNotEditable
	}
	var name *string
	if v, ok := f.str("name", false); ok {
		f.maxBytes("name", v, maxNameBytes)
		name = &v
	}
	var image **string
	if raw, ok := f.m["image"]; ok {
		var v *string
		if string(raw) != "null" {
			if s, ok := f.str("image", true); ok {
				v = &s
			}
		}
		image = &v
	}
	if apiErr := f.err(); apiErr != nil {
		return apiErr
	}
	if name == nil && image == nil {
		return errNoFields
	}
	if _, err := iss.store.UpdateUser(r.Context(), u.ID, name, image, iss.stamp()); err != nil {
		return storeErr(err)
	}
	writeJSON(w, http.StatusOK, struct {
		Status bool `json:"status"`
	}{true})
	return nil
}

// changeEmail moves the user to newEmail. With mail on, every account
// changes only once the user follows the link mailed to the new address
// (Better Auth does so for verified addresses): the answer, its timing
// and what get-session shows are then the same whether the address is
// free or another account's, since the lookup and the queueing run after
// the answer and a taken address gets no mail. Without mail an unverified
// address changes at once, unverified (Better Auth's
// updateEmailWithoutVerification), when free, and answers the same when
// taken: sign-up tells a taken address then anyway (422
// USER_ALREADY_EXISTS). An account with an identity-provider account
// linked cannot change its address: the provider account would follow it,
// and the owner of the new address proving it would hand the account to
// whoever linked it (issue 30).
func (iss *Issuer) changeEmail(w http.ResponseWriter, r *http.Request) *apiError {
	if ok, wait := iss.mailIP.allow(iss.clientIP(r)); !ok {
		return tooMany(w, wait)
	}
	f, apiErr := readFields(w, r, iss.bodyBytes, false)
	if apiErr != nil {
		return apiErr
	}
	email, hasEmail := f.str("newEmail", true)
	callback, _ := f.str("callbackURL", false)
	if hasEmail && !validEmail(email) {
		f.fail("newEmail", "Invalid email address")
	}
	if apiErr := f.err(); apiErr != nil {
		return apiErr
	}
	if !iss.safeRedirect(callback) {
		return errInvalidCallback
	}
	_, u, apiErr := iss.signedIn(r)
	if apiErr != nil {
		return apiErr
	}
	email = strings.ToLower(email)
	switch {
	case email == u.Email:
		return errSameEmail
	case u.EmailVerified && !iss.rec.on:
		return errVerificationDisabled
	}
	if linked, err := iss.hasProviderAccount(r.Context(), u.ID); err != nil {
		return storeErr(err)
	} else if linked {
		iss.log.Info("change-email refused: an identity-provider account is linked", "user_id", u.ID)
		return errEmailLinked
	}
	ok := func() *apiError {
		writeJSON(w, http.StatusOK, struct {
			Status bool `json:"status"`
		}{true})
		return nil
	}
	if !iss.rec.on {
		_, err := iss.store.SetEmail(r.Context(), u.ID, email, iss.stamp())
		if errors.Is(err, ErrEmailTaken) {
			iss.log.Info("change-email to an address another account has: nothing done", "user_id", u.ID)
			return ok()
		}
		if err != nil {
			return storeErr(err)
		}
		return ok()
	}
	link := iss.verifyLink(callback)
	if !iss.rec.intake.run(r.Context(), func(ctx context.Context) {
		if err := iss.queueChangeEmail(ctx, u, email, link); err != nil {
			iss.log.Error("change-email: mail not queued", "user_id", u.ID, "error", err.Error())
		}
	}) {
		w.Header().Set("Retry-After", "1")
		return errIntakeFull
	}
	return ok()
}

// hasProviderAccount reports whether the user has an identity-provider
// account linked (any account but the password's).
func (iss *Issuer) hasProviderAccount(ctx context.Context, userID string) (bool, error) {
	if iss.social.accounts == nil {
		return false, nil // a store without provider accounts
	}
	as, err := iss.social.accounts.Accounts(ctx, userID)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(as, func(a Account) bool { return a.ProviderID != credentialProvider }), nil
}

// queueChangeEmail mails a change-of-address link to email, within the
// per-address budget of verification mails (spent whether or not the
// address is taken, so the limit tells nothing either); an address
// another account claims gets nothing.
func (iss *Issuer) queueChangeEmail(ctx context.Context, u User, email string, link func(string) string) error {
	if ok, _, err := iss.mailBudget(ctx, mail.EmailVerification, email); err != nil {
		return err
	} else if !ok {
		iss.log.Info("mail not queued: per-address limit reached", "type", string(mail.EmailVerification), "user_id", u.ID)
		return nil
	}
	if taken, err := iss.addressTaken(ctx, email); err != nil {
		return err
	} else if taken {
		iss.log.Info("change-email to an address another account has: nothing sent", "user_id", u.ID)
		return nil
	}
	to := u
	to.Email = email
	if _, err := queueLink(ctx, iss.store, iss.rec.seal, KindChangeEmail, mail.EmailVerification, to, link, iss.rec.verifyTTL, iss.now()); err != nil {
		return err
	}
	iss.rec.queued(mail.EmailVerification)
	return nil
}

// addressTaken reports whether a user claims email.
func (iss *Issuer) addressTaken(ctx context.Context, email string) (bool, error) {
	_, err := claimant(ctx, iss.store, email)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, err
}

// deleteUser deletes the signed-in user, when the operator allows it
// (auth.allow_delete_user; 404 otherwise, as Better Auth without
// deleteUser.enabled): with the right password, or without one from a
// session younger than a day. Every JWT of the user is revoked with it.
func (iss *Issuer) deleteUser(w http.ResponseWriter, r *http.Request) *apiError {
	if !iss.acct.AllowDeleteUser {
		return errNotFound
	}
	f, apiErr := readFields(w, r, iss.bodyBytes, false)
	if apiErr != nil {
		return apiErr
	}
	password, hasPassword := f.str("password", false)
	_, hasToken := f.str("token", false)
	f.str("callbackURL", false)
	if apiErr := f.err(); apiErr != nil {
		return apiErr
	}
	s, u, apiErr := iss.signedIn(r)
	if apiErr != nil {
		return apiErr
	}
	if hasPassword && password != "" {
		if apiErr := iss.checkPassword(w, r, u.ID, password); apiErr != nil {
			return apiErr
		}
	}
	switch {
	case hasToken:
		// Better Auth's mailed deletion links; none are ever sent here.
		return errNoDeleteToken
	case (!hasPassword || password == "") && !iss.fresh(s):
		return errReauthenticate
	}
	// The password's hash may have used the request's time: the deletion
	// gets the store's whole budget again.
	r, done := afterHash(r)
	defer done()
	if err := iss.store.DeleteUser(r.Context(), u.ID, iss.stamp()); err != nil && !errors.Is(err, ErrNotFound) {
		return storeErr(err)
	}
	iss.log.Info("user deleted itself", "user_id", u.ID)
	iss.cookies.clear(w)
	writeJSON(w, http.StatusOK, struct {
		Success bool   `json:"success"`
		Message string `json:"message"`
	}{true, "User deleted"})
	return nil
}
