package issuer

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Results of a lazy migration, the "result" label of
// authsidecar_legacy_signins_total.
const (
	legacyMigrated    = "migrated"    // the user was created and signed in (or refused as unverified)
	legacyRefused     = "refused"     // 401 or 404: INVALID_EMAIL_OR_PASSWORD
	legacyUnavailable = "unavailable" // a 5xx, another status, a timeout: 503
	legacyInvalid     = "invalid"     // a 200 that is not a valid user: 503
	legacyConflict    = "conflict"    // its id is another address's user here: INVALID_EMAIL_OR_PASSWORD
	legacyRaced       = "raced"       // another request created the address's user first: signed in as it
)

// legacyResults lists every result, so each series exists from the start.
var legacyResults = []string{legacyMigrated, legacyRefused, legacyUnavailable, legacyInvalid, legacyConflict, legacyRaced}

// maxLegacyRoles bounds the roles one answer grants.
const maxLegacyRoles = 64

// errLegacyUnavailable: the legacy application could not say, or said
// something that is not a user. Nothing was stored; the client may retry.
func errLegacyUnavailable(cause error) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: "LEGACY_SIGNIN_UNAVAILABLE",
		message: "Sign-in is temporarily unavailable for this account; retry shortly", cause: cause}
}

// hashed is the outcome of a hash run beside the legacy call.
type hashed struct {
	hash string
	err  error
}

// signInLegacy answers a sign-in for an address the sidecar does not
// know, when lazy migration is on. The per-IP and per-email limits have
// been taken already: a flood of guesses is not passed on. An address a
// user claims without a password (an identity provider's user) is known:
// it is answered as today, without asking. Otherwise the legacy
// application is asked while the password is hashed the sidecar's way,
// so that "the legacy application says no" costs what a wrong password
// costs (one hash) unless the legacy application itself takes longer,
// and a yes finds its hash ready.
func (iss *Issuer) signInLegacy(w http.ResponseWriter, r *http.Request, in signInForm) *apiError {
	ctx := r.Context()
	if _, err := iss.migration.UserByEmail(ctx, in.email); err == nil {
		return iss.unknownAddress(w, r, in.password)
	} else if !errors.Is(err, ErrNotFound) {
		return storeErr(err)
	}
	done := make(chan hashed, 1)
	go func() {
		h, err := iss.hasher.hash(ctx, in.password)
		done <- hashed{h, err}
	}()
	lu, err := iss.legacy.SignIn(ctx, in.email, in.password)
	if err == nil {
		err = validLegacyUser(lu, in.email)
	}
	h := <-done
	switch {
	case errors.Is(err, ErrLegacyRefused):
		iss.countLegacy(legacyRefused)
		if h.err != nil {
			return hashErr(w, h.err)
		}
		return errInvalidCredentials
	case errors.Is(err, ErrLegacyInvalid):
		iss.countLegacy(legacyInvalid)
		return errLegacyUnavailable(fmt.Errorf("legacy sign-in: %w", err))
	case err != nil:
		iss.countLegacy(legacyUnavailable)
		return errLegacyUnavailable(fmt.Errorf("legacy sign-in: %w", err))
	case h.err != nil:
		// The legacy application said yes, but no hashing slot was free
		// in time: nothing stored, and a retry asks again.
		return hashErr(w, h.err)
	}
	r, release := afterHash(r)
	defer release()
	return iss.migrate(w, r, in, lu, h.hash)
}

// migrate stores the user the legacy application answered with, its
// roles and its first session in one transaction, and answers the
// sign-in as for any user. The store's constraints settle a race: a
// sign-in that finds the address or the id taken reads the user again.
func (iss *Issuer) migrate(w http.ResponseWriter, r *http.Request, in signInForm, lu LegacyUser, hash string) *apiError {
	now := iss.now().UTC().Truncate(timeUnit)
	name := lu.Name
	if name == "" {
		name, _, _ = strings.Cut(in.email, "@")
	}
	u := User{ID: lu.ID, Name: name, Email: in.email, EmailVerified: lu.EmailVerified, CreatedAt: now, UpdatedAt: now}
	// Under require_email_verification an unverified address gets no
	// session: the user is stored all the same, and refused as any
	// unverified user is.
	unverified := iss.rec.require && !u.EmailVerified
	var s Session
	if !unverified {
		var err error
		if s, err = iss.newSession(r, u.ID, in.remember); err != nil {
			return errInternal(err)
		}
	}
	err := iss.migration.CreateMigratedUser(r.Context(), u, hash, lu.Roles, s)
	switch {
	case errors.Is(err, ErrEmailTaken) || errors.Is(err, ErrUserIDTaken):
		return iss.migrateRaced(w, r, in, lu.ID, errors.Is(err, ErrUserIDTaken))
	case err != nil:
		return storeErr(err)
	}
	iss.countLegacy(legacyMigrated)
	iss.log.Info("user migrated from the legacy application", "user_id", u.ID, "roles", len(lu.Roles))
	if unverified {
		return iss.refuseUnverified(r, in, u)
	}
	iss.answerSignIn(w, in, u, s)
	return nil
}

// migrateRaced answers a migration whose insert found the address or the
// id taken. The address's user now exists (another sign-in for it
// migrated it a moment ago, or a sign-up took it): the sign-in checks
// the password against that user, as for any user. An id held by a user
// of another address is a conflict: the legacy application's record is
// stale (the user changed address here) or its ids overlap users
// imported from elsewhere. It is refused as a wrong password is, since
// this address has no user here, and logged for the operator.
func (iss *Issuer) migrateRaced(w http.ResponseWriter, r *http.Request, in signInForm, id string, idTaken bool) *apiError {
	u, hash, err := iss.store.CredentialByEmail(r.Context(), in.email)
	switch {
	case err == nil:
		iss.countLegacy(legacyRaced)
		return iss.signInAs(w, r, in, u, hash)
	case !errors.Is(err, ErrNotFound):
		return storeErr(err)
	case idTaken:
		iss.countLegacy(legacyConflict)
		iss.log.Warn("legacy sign-in refused: the legacy application's id belongs to a user of another address here; nothing stored",
			"user_id", id)
		return errInvalidCredentials
	}
	// A user without a password claimed the address meanwhile.
	iss.countLegacy(legacyRaced)
	return errInvalidCredentials
}

// validLegacyUser checks the legacy application's answer as an import
// line is checked: the id by the id rule, the address the one signed in
// with (case aside: the legacy application may keep its case), the name
// and the roles bounded. Anything else is ErrLegacyInvalid, with the
// reason (never a value the answer holds, which the log would show).
func validLegacyUser(lu LegacyUser, email string) error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrLegacyInvalid, fmt.Sprintf(format, args...))
	}
	switch {
	case !ValidUserID(lu.ID):
		return invalid("id is not %s (%d bytes)", UserIDRule, len(lu.ID))
	case !strings.EqualFold(lu.Email, email):
		return invalid("email is not the address signed in with")
	case len(lu.Name) > maxNameBytes:
		return invalid("name is %d bytes, more than %d", len(lu.Name), maxNameBytes)
	case len(lu.Roles) > maxLegacyRoles:
		return invalid("%d roles, more than %d", len(lu.Roles), maxLegacyRoles)
	}
	for i, role := range lu.Roles {
		if !ValidRole(role) {
			return invalid("roles[%d] is not a role name ([a-z0-9_-]+)", i)
		}
	}
	return nil
}

// countLegacy counts a lazy migration's result.
func (iss *Issuer) countLegacy(result string) {
	iss.metrics.legacy.WithLabelValues(result).Inc()
}
