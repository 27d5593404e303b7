package issuer

// Password reset: request-password-reset, the link's GET, and
// reset-password.

import (
	"context"
	"errors"
	"net/http"

	"github.com/authsidecar/authsidecar/mail"
)

// requestPasswordReset queues a reset link for a known address and answers
// every address alike, at once: the lookup and the queueing run after the
// answer, so its timing says nothing about the account either.
func (iss *Issuer) requestPasswordReset(w http.ResponseWriter, r *http.Request) *apiError {
	email, redirectTo, apiErr := iss.mailRequest(w, r, "redirectTo", errResetDisabled, errInvalidRedirect)
	if apiErr != nil {
		return apiErr
	}
	if !iss.rec.intake.run(r.Context(), func(ctx context.Context) {
		u, err := claimant(ctx, iss.store, email)
		if errors.Is(err, ErrNotFound) {
			// Spend the per-address budget all the same: a limit that
			// only counted known addresses would tell them apart.
			if _, _, err := iss.mailBudget(ctx, mail.PasswordReset, email); err != nil {
				iss.log.Error("password reset: rate limit", "error", err.Error())
			}
			return
		}
		if err == nil {
			err = iss.queueLink(ctx, mail.PasswordReset, u, iss.resetLink(redirectTo))
		}
		if err != nil {
			iss.log.Error("password reset: mail not queued", "error", err.Error())
		}
	}) {
		w.Header().Set("Retry-After", "1")
		return errIntakeFull
	}
	writeJSON(w, http.StatusOK, struct {
		Status  bool   `json:"status"`
		Message string `json:"message"`
	}{true, "If this email exists in our system, check your email for the reset link"})
	return nil
}

// resetPasswordCallback is where a mailed reset link lands: it checks the
// token (without spending it) and redirects to the page that asks for the
// new password, with token= or error=INVALID_TOKEN.
func (iss *Issuer) resetPasswordCallback(w http.ResponseWriter, r *http.Request, tok string) *apiError {
	if ok, wait := iss.tokenIP.allow(iss.clientIP(r)); !ok {
		return tooMany(w, wait)
	}
	q := r.URL.Query()
	if _, ok := q["callbackURL"]; !ok {
		return errBadRequest("VALIDATION_ERROR", "[query.callbackURL] Invalid input: expected string, received undefined")
	}
	callback := q.Get("callbackURL")
	if callback != "" && !iss.safeRedirect(callback) {
		return errInvalidCallback
	}
	if callback == "" {
		// Better Auth lands on an error page here even with a valid token;
		// ours lands on a page that works.
		callback = iss.rec.resetPage
		if callback == "" {
			callback = BasePath + resetPagePath
		}
	}
	valid := false
	if len(tok) <= maxTokenBytes {
		var err error
		if valid, err = iss.store.ResetTokenValid(r.Context(), hashToken(tok), iss.now()); err != nil {
			return storeErr(err)
		}
	}
	key, value := "error", "INVALID_TOKEN"
	if valid {
		key, value = "token", tok
	}
	loc, err := withParam(iss.origin, callback, key, value)
	if err != nil {
		return errInvalidCallback
	}
	redirect(w, loc)
	return nil
}

// resetPassword sets a new password with a reset token, in Better Auth's
// order of checks: schema, token present, length, token valid.
func (iss *Issuer) resetPassword(w http.ResponseWriter, r *http.Request) *apiError {
	if ok, wait := iss.tokenIP.allow(iss.clientIP(r)); !ok {
		return tooMany(w, wait)
	}
	f, apiErr := readFields(w, r, iss.bodyBytes, false)
	if apiErr != nil {
		return apiErr
	}
	password, _ := f.str("newPassword", true)
	tok, hasTok := f.str("token", false)
	if apiErr := f.err(); apiErr != nil {
		return apiErr
	}
	if !hasTok {
		tok = r.URL.Query().Get("token")
	}
	if tok == "" {
		return errInvalidResetToken
	}
	if apiErr := iss.checkPasswordLength(password); apiErr != nil {
		return apiErr
	}
	if apiErr := iss.applyReset(w, r, tok, password); apiErr != nil {
		return apiErr
	}
	writeJSON(w, http.StatusOK, struct {
		Status bool `json:"status"`
	}{true})
	return nil
}

// applyReset spends tok and sets password; shared by the JSON endpoint and
// the built-in page.
func (iss *Issuer) applyReset(w http.ResponseWriter, r *http.Request, tok, password string) *apiError {
	if len(tok) > maxTokenBytes {
		return errInvalidResetToken
	}
	hash := hashToken(tok)
	// Checked before hashing, so guessing tokens buys no scrypt time; the
	// transaction below checks again.
	valid, err := iss.store.ResetTokenValid(r.Context(), hash, iss.now())
	if err != nil {
		return storeErr(err)
	}
	if !valid {
		return errInvalidResetToken
	}
	pwHash, err := iss.hasher.hash(r.Context(), password)
	if err != nil {
		return hashErr(w, err)
	}
	r, done := afterHash(r)
	defer done()
	u, proof, err := iss.store.ResetPassword(r.Context(), hash, pwHash, iss.rec.revoke, iss.now().UTC().Truncate(timeUnit))
	if errors.Is(err, ErrNotFound) {
		return errInvalidResetToken
	}
	if err != nil {
		return storeErr(err)
	}
	iss.log.Info("password reset by link", "user_id", u.ID, "sessions_ended", proof.SessionsEnded)
	iss.provenBy("password_reset", u, proof)
	return nil
}
