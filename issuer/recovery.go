package issuer

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/mail"
)

// Account recovery: password reset and email verification by mailed link.
// A link's token is 32 random bytes; only its SHA-256 is stored, it works
// once, a newer link of the same kind replaces it, and it expires. The
// message carrying it is queued in the outbox in the transaction that
// stores the hash, sealed with a key derived from AUTH_SECRET, and a
// background worker delivers it.

// RecoveryToken is a stored reset or verification token: only its SHA-256
// is kept.
type RecoveryToken struct {
	Hash      [32]byte
	Kind      mail.Kind
	UserID    string
	Email     string // the address it was sent to
	ExpiresAt time.Time
	CreatedAt time.Time
}

// Sealer encrypts an outbox payload for the row id (mail.Box does).
type Sealer interface {
	Seal(id string, m mail.Message) ([]byte, error)
}

// RecoveryOptions turns account recovery on. The zero value leaves it off:
// the mail endpoints answer 400 as Better Auth does without a sender.
type RecoveryOptions struct {
	// Sealer encrypts queued messages. Required for recovery to be on.
	Sealer Sealer
	// Queued is called after a message is committed to the outbox (to
	// wake the delivery worker and count it). Zero: nothing is called.
	Queued func(mail.Kind)
	// ResetTokenTTL and VerificationTokenTTL are the link lifetimes.
	// Zero: 1h and 24h.
	ResetTokenTTL, VerificationTokenTTL time.Duration
	// RequireEmailVerification refuses sign-in to unverified users and
	// makes sign-up mail a link instead of starting a session.
	RequireEmailVerification bool
	// SendOnSignin re-sends the link when an unverified user signs in with
	// the right password.
	SendOnSignin bool
	// SignInAfterVerification makes a verification link sign in the
	// browser that opens it, if that browser has no session (one signed in
	// as the same user keeps its session; one signed in as another user
	// keeps that session too). Zero (false), as Better Auth's
	// autoSignInAfterVerification: the link only verifies, and cannot be
	// used to sign a victim into the sender's account.
	SignInAfterVerification bool
	// KeepSessionsOnReset keeps a user's cookie sessions when a password is
	// reset by link. Zero (false): they all end.
	KeepSessionsOnReset bool
	// ResetPage is where a reset link without callbackURL lands. Zero: the
	// built-in page.
	ResetPage string
}

// recovery is the issuer's account-recovery state. Only the limiters
// change on reload; the intake is shared by every copy.
type recovery struct {
	on          bool
	seal        Sealer
	queued      func(mail.Kind)
	resetTTL    time.Duration
	verifyTTL   time.Duration
	require     bool
	sendOnLogin bool
	// signInAfterVerify: SignInAfterVerification.
	signInAfterVerify bool
	revoke            bool
	resetPage         string
	intake            *intake
}

func newRecovery(o RecoveryOptions) *recovery {
	def := func(d, v time.Duration) time.Duration {
		if d <= 0 {
			return v
		}
		return d
	}
	rc := &recovery{
		on:                o.Sealer != nil,
		seal:              o.Sealer,
		queued:            o.Queued,
		resetTTL:          def(o.ResetTokenTTL, time.Hour),
		verifyTTL:         def(o.VerificationTokenTTL, 24*time.Hour),
		require:           o.RequireEmailVerification,
		sendOnLogin:       o.SendOnSignin,
		signInAfterVerify: o.SignInAfterVerification,
		revoke:            !o.KeepSessionsOnReset,
		resetPage:         o.ResetPage,
		intake:            newIntake(intakeBacklog, intakeWorkers),
	}
	if rc.queued == nil {
		rc.queued = func(mail.Kind) {}
	}
	return rc
}

var (
	errResetDisabled        = errBadRequest("RESET_PASSWORD_DISABLED", "Reset password isn't enabled")
	errVerificationDisabled = errBadRequest("VERIFICATION_EMAIL_NOT_ENABLED", "Verification email isn't enabled")
	errInvalidRedirect      = &apiError{status: http.StatusForbidden, code: "INVALID_REDIRECT_URL", message: "Invalid redirectURL"}
	errInvalidResetToken    = errBadRequest("INVALID_TOKEN", "Invalid token")
	errInvalidVerifyToken   = &apiError{status: http.StatusUnauthorized, code: "INVALID_TOKEN", message: "Invalid token"}
	errEmailMismatch        = errBadRequest("EMAIL_MISMATCH", "Email mismatch")
	errAlreadyVerified      = errBadRequest("EMAIL_ALREADY_VERIFIED", "Email is already verified")
	errEmailNotVerified     = &apiError{status: http.StatusForbidden, code: "EMAIL_NOT_VERIFIED", message: "Email not verified"}
	errEmailUnclaimed       = &apiError{status: http.StatusForbidden, code: "EMAIL_NOT_VERIFIABLE", message: "This address came from an identity provider that did not verify it: it cannot be verified by mail"}
	errMissingOrigin        = &apiError{status: http.StatusForbidden, code: "MISSING_OR_NULL_ORIGIN", message: "Missing or null Origin"}
	errIntakeFull           = &apiError{status: http.StatusServiceUnavailable, code: "SERVICE_UNAVAILABLE", message: "Too many requests at once; retry shortly"}
)

// maxTokenBytes bounds a token read from a request: ours are 43 bytes,
// and anything longer is simply not one (it is hashed, never parsed).
const maxTokenBytes = 512

// newLinkToken returns a fresh link token (32 random bytes, base64url)
// and its SHA-256, the only form stored.
func newLinkToken() (string, [32]byte, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", [32]byte{}, fmt.Errorf("link token: %w", err)
	}
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	return tok, sha256.Sum256([]byte(tok)), nil
}

func hashToken(tok string) [32]byte { return sha256.Sum256([]byte(tok)) }

// mailRequest reads and checks what both mail-sending endpoints take, in
// Better Auth's order (the origin is checked before, in ServeHTTP): the
// per-IP limit, the body {email, <target>?}, whether mail is on
// (disabled), and the redirect target (invalid). email comes back
// lower-cased.
func (iss *Issuer) mailRequest(w http.ResponseWriter, r *http.Request, target string, disabled, invalid *apiError) (email, to string, apiErr *apiError) {
	if ok, wait := iss.mailIP.allow(iss.clientIP(r)); !ok {
		return "", "", tooMany(w, wait)
	}
	f, apiErr := readFields(w, r, iss.bodyBytes, false)
	if apiErr != nil {
		return "", "", apiErr
	}
	email, hasEmail := f.str("email", true)
	if raw, ok := f.m[target]; ok && string(raw) != "null" && jsonKind(raw) != "string" && target == "redirectTo" {
		// Better Auth's own words for this one, ahead of the schema's.
		return "", "", errBadRequest("VALIDATION_ERROR", "Invalid redirectURL: expected a string")
	}
	to, _ = f.str(target, false)
	if hasEmail && !validEmail(email) {
		f.fail("email", "Invalid email address")
	}
	if apiErr := f.err(); apiErr != nil {
		return "", "", apiErr
	}
	if !iss.rec.on {
		return "", "", disabled
	}
	if !iss.safeRedirect(to) {
		return "", "", invalid
	}
	return strings.ToLower(email), to, nil
}
