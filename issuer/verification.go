package issuer

// Email verification: send-verification-email and verify-email.

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/authsidecar/authsidecar/mail"
)

// sendVerificationEmail mails a verification link. With a session it is
// about that user (EMAIL_MISMATCH, EMAIL_ALREADY_VERIFIED); without one,
// every address gets the same answer at once and the work runs after it.
func (iss *Issuer) sendVerificationEmail(w http.ResponseWriter, r *http.Request) *apiError {
	email, callback, apiErr := iss.mailRequest(w, r, "callbackURL", errVerificationDisabled, errInvalidCallback)
	if apiErr != nil {
		return apiErr
	}
	_, su, found, _, err := iss.lookup(r.Context(), r, true)
	if err != nil {
		return storeErr(err)
	}
	if found {
		switch {
		case su.Email != email:
			return errEmailMismatch
		case su.EmailVerified:
			return errAlreadyVerified
		case su.EmailUnclaimed:
			// A provider gave this address without verifying it: a link
			// the owner followed would hand them this account's history
			// and the address to whoever made it.
			return errEmailUnclaimed
		}
		if err := iss.queueLink(r.Context(), mail.EmailVerification, su, iss.verifyLink(callback)); err != nil {
			return storeErr(err)
		}
	} else if !iss.rec.intake.run(r.Context(), func(ctx context.Context) {
		u, _, err := iss.store.CredentialByEmail(ctx, email)
		switch {
		case errors.Is(err, ErrNotFound) || (err == nil && u.EmailVerified):
			if _, _, err := iss.mailBudget(ctx, mail.EmailVerification, email); err != nil {
				iss.log.Error("verification email: rate limit", "error", err.Error())
			}
			return
		case err == nil:
			err = iss.queueLink(ctx, mail.EmailVerification, u, iss.verifyLink(callback))
		}
		if err != nil {
			iss.log.Error("verification email: mail not queued", "error", err.Error())
		}
	}) {
		w.Header().Set("Retry-After", "1")
		return errIntakeFull
	}
	writeJSON(w, http.StatusOK, struct {
		Status bool `json:"status"`
	}{true})
	return nil
}

// verifyEmail spends a verification token and marks the address verified;
// with RecoveryOptions.SignInAfterVerification it may also sign the
// browser in, in the transaction that spends the token, so a failure
// leaves the link working instead of spent behind an error.
//
// Better Auth's autoSignInAfterVerification, minus its login CSRF: the
// link is a top-level navigation anyone can send a victim to (with a link
// for an address of the sender's), so it signs in only a browser with no
// session, and re-sets the cookie of one already signed in as that user.
// A browser signed in as someone else keeps its session: the address is
// verified, nobody is signed out or in.
func (iss *Issuer) verifyEmail(w http.ResponseWriter, r *http.Request) *apiError {
	if ok, wait := iss.tokenIP.allow(iss.clientIP(r)); !ok {
		return tooMany(w, wait)
	}
	q := r.URL.Query()
	if _, ok := q["token"]; !ok {
		return errBadRequest("VALIDATION_ERROR", "[query.token] Invalid input: expected string, received undefined")
	}
	tok := q.Get("token")
	_, hasCallback := q["callbackURL"]
	callback := q.Get("callbackURL")
	if hasCallback && callback != "" && !iss.safeRedirect(callback) {
		return errInvalidCallback
	}
	fail := func() *apiError {
		if hasCallback && callback != "" {
			sep := "?"
			if strings.Contains(callback, "?") {
				sep = "&"
			}
			redirect(w, callback+sep+"error=INVALID_TOKEN")
			return nil
		}
		return errInvalidVerifyToken
	}
	if tok == "" || len(tok) > maxTokenBytes {
		return fail()
	}
	// Everything that can fail comes before the token is spent.
	var (
		s     Session
		su    User
		found bool
		ns    *Session
	)
	if iss.rec.signInAfterVerify {
		var err error
		if s, su, found, _, err = iss.lookup(r.Context(), r, true); err != nil {
			return storeErr(err)
		}
		if !found {
			n, err := iss.newSession(r, "", true)
			if err != nil {
				return errInternal(err)
			}
			ns = &n
		}
	}
	now := iss.now().UTC().Truncate(timeUnit)
	u, proof, err := iss.store.VerifyEmail(r.Context(), hashToken(tok), now, ns)
	if errors.Is(err, ErrNotFound) {
		return fail()
	}
	if err != nil {
		return storeErr(err)
	}
	iss.provenBy("email_verification", u, proof)
	switch {
	case proof.WasVerified || !iss.rec.signInAfterVerify:
	case found && su.ID == u.ID:
		iss.setSessionCookie(w, s)
	case found:
		iss.log.Info("verification link opened in another user's session: the session is kept, nobody signed in")
	case u.Ban.Active(now):
		// Verified, but a banned user is signed in nowhere (the store
		// inserted no session).
		iss.log.Info("verification link of a banned user: verified, nobody signed in", "user_id", u.ID)
	default:
		ns.UserID = u.ID
		iss.setSessionCookie(w, *ns)
	}
	if hasCallback && callback != "" {
		redirect(w, callback)
		return nil
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	writeJSON(w, http.StatusOK, struct {
		Status bool      `json:"status"`
		User   *userJSON `json:"user"`
	}{true, nil})
	return nil
}

// provenBy logs and counts the provider accounts a proof of u's address
// removed (Proof); cause is the metric's label.
func (iss *Issuer) provenBy(cause string, u User, p Proof) {
	if len(p.Unlinked) == 0 {
		return
	}
	iss.metrics.unlinked.WithLabelValues(cause).Add(float64(len(p.Unlinked)))
	iss.log.Warn("provider accounts linked before the address was proven were removed",
		"user_id", u.ID, "cause", cause, "providers", p.Unlinked)
}
