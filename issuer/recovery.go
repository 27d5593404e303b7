package issuer

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
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
	revoke      bool
	resetPage   string
	intake      *intake
}

func newRecovery(o RecoveryOptions) *recovery {
	def := func(d, v time.Duration) time.Duration {
		if d <= 0 {
			return v
		}
		return d
	}
	rc := &recovery{
		on:          o.Sealer != nil,
		seal:        o.Sealer,
		queued:      o.Queued,
		resetTTL:    def(o.ResetTokenTTL, time.Hour),
		verifyTTL:   def(o.VerificationTokenTTL, 24*time.Hour),
		require:     o.RequireEmailVerification,
		sendOnLogin: o.SendOnSignin,
		revoke:      !o.KeepSessionsOnReset,
		resetPage:   o.ResetPage,
		intake:      newIntake(intakeBacklog, intakeWorkers),
	}
	if rc.queued == nil {
		rc.queued = func(mail.Kind) {}
	}
	return rc
}

// intake runs the work behind a request whose answer must not depend on
// it (does this address have an account?) after the answer is sent, so
// known and unknown addresses are answered in the same time. Jobs wait in
// a bounded backlog and run a few at a time: the store serializes writes
// anyway, and a flood must not become thousands of concurrent
// transactions. When the backlog is full, callers get 503 whatever the
// address.
type intake struct {
	queued  atomic.Int64
	backlog int64
	running chan struct{} // one token per job running now
	mu      sync.Mutex    // orders run's wg.Add before close's wg.Wait
	closed  bool
	wg      sync.WaitGroup
}

// Intake sizes: the backlog absorbs a burst (per-IP limits keep one
// client far below it); the workers are enough to keep a store busy.
const (
	intakeBacklog = 4096
	intakeWorkers = 4
)

func newIntake(backlog, workers int) *intake {
	return &intake{backlog: int64(backlog), running: make(chan struct{}, workers)}
}

// intakeTimeout bounds one job once it runs.
const intakeTimeout = 15 * time.Second

// run queues f, detached from the request; false when the backlog is full.
func (in *intake) run(ctx context.Context, f func(context.Context)) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed || in.queued.Add(1) > in.backlog {
		if !in.closed {
			in.queued.Add(-1)
		}
		return false
	}
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		defer in.queued.Add(-1)
		in.running <- struct{}{}
		defer func() { <-in.running }()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), intakeTimeout)
		defer cancel()
		f(ctx)
	}()
	return true
}

// Wait returns once the work queued after answered requests (reset and
// verification mail) has finished. Requests may still be arriving: work
// they queue meanwhile may or may not be waited for.
func (iss *Issuer) Wait() {
	in := iss.rec.intake
	in.mu.Lock() // no run between reading the count and waiting
	defer in.mu.Unlock()
	in.wg.Wait()
}

// Drain stops taking such work and waits for what was queued: call it
// once the server has stopped, before closing the store. A request still
// running past the shutdown grace then gets 503.
func (iss *Issuer) Drain() {
	in := iss.rec.intake
	in.mu.Lock()
	in.closed = true
	in.mu.Unlock()
	in.wg.Wait()
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

// queueLink stores a new token of kind for u and queues the message
// carrying its link, in one transaction. link builds the URL from the
// token. The per-address limit is taken first: over it, nothing is
// queued and nothing is said (the caller answers as if it were).
func (iss *Issuer) queueLink(ctx context.Context, kind mail.Kind, u User, link func(token string) string) error {
	if ok, _, err := iss.mailBudget(ctx, kind, u.Email); err != nil {
		return err
	} else if !ok {
		iss.log.Info("mail not queued: per-address limit reached", "type", string(kind), "user_id", u.ID)
		return nil
	}
	ttl := iss.rec.resetTTL
	if kind == mail.EmailVerification {
		ttl = iss.rec.verifyTTL
	}
	if _, err := QueueLink(ctx, iss.store, iss.rec.seal, kind, u, link, ttl, iss.now()); err != nil {
		return err
	}
	iss.rec.queued(kind)
	return nil
}

// mailBudget takes one mail of kind to email from the per-address limit.
// Each kind has its own budget: verification requests, which anyone may
// make for any address, must not use up the budget of password resets.
func (iss *Issuer) mailBudget(ctx context.Context, kind mail.Kind, email string) (bool, time.Duration, error) {
	return iss.mailAddr.allow(ctx, string(kind)+":"+email)
}

// QueueLink stores a new token of kind for u (replacing the user's older
// ones of that kind) and queues the sealed message carrying its link, in
// one transaction; it returns the message's id. link builds the URL from
// the token. No limit is applied: the issuer takes its own first, and the
// operator's "outbox retry" is one message.
func QueueLink(ctx context.Context, store Store, seal Sealer, kind mail.Kind, u User, link func(token string) string, ttl time.Duration, now time.Time) (string, error) {
	tok, hash, err := newLinkToken()
	if err != nil {
		return "", err
	}
	id := mail.NewID()
	now = now.UTC().Truncate(timeUnit)
	t := RecoveryToken{Hash: hash, Kind: kind, UserID: u.ID, Email: u.Email, ExpiresAt: now.Add(ttl), CreatedAt: now}
	sealed, err := seal.Seal(id, mail.Message{
		Kind: kind, To: u.Email, URL: link(tok), TokenExpiresAt: t.ExpiresAt,
		User: mail.User{ID: u.ID, Email: u.Email, Name: u.Name},
	})
	if err != nil {
		return "", fmt.Errorf("seal %s message: %w", kind, err)
	}
	q := mail.Queued{ID: id, Kind: kind, UserID: u.ID, Sealed: sealed, State: mail.StatePending, CreatedAt: now, NextAttemptAt: now}
	if err := store.IssueRecoveryToken(ctx, t, q); err != nil {
		return "", fmt.Errorf("queue %s message: %w", kind, err)
	}
	return id, nil
}

// LinkFor is the link a message of kind carries when nobody chose where
// it lands: the reset page, or "/" after verification.
func LinkFor(baseURL string, kind mail.Kind) (func(token string) string, error) {
	base, err := url.Parse(baseURL)
	if err != nil || base.Host == "" {
		return nil, fmt.Errorf("base URL %q is not an absolute URL", baseURL)
	}
	origin := base.Scheme + "://" + base.Host
	if kind == mail.EmailVerification {
		return func(tok string) string { return verifyURL(origin, "/", tok) }, nil
	}
	return func(tok string) string { return resetURL(origin, "", tok) }, nil
}

// resetLink is the mailed reset URL, Better Auth's shape: callbackURL is
// empty when the client gave no redirectTo (ours then lands on the reset
// page; Better Auth's on an error page).
func (iss *Issuer) resetLink(redirectTo string) func(string) string {
	return func(tok string) string { return resetURL(iss.origin, redirectTo, tok) }
}

func resetURL(origin, redirectTo, tok string) string {
	return origin + BasePath + "/reset-password/" + tok + "?callbackURL=" + url.QueryEscape(redirectTo)
}

// verifyLink is the mailed verification URL.
func (iss *Issuer) verifyLink(callbackURL string) func(string) string {
	if callbackURL == "" {
		callbackURL = "/"
	}
	return func(tok string) string { return verifyURL(iss.origin, callbackURL, tok) }
}

func verifyURL(origin, callbackURL, tok string) string {
	return origin + BasePath + "/verify-email?token=" + tok + "&callbackURL=" + url.QueryEscape(callbackURL)
}

// ResetLink makes a password-reset link for the user with email without
// mailing it, for an operator ("users reset-link"): the link lands on the
// built-in reset page, whatever email.delivery says. It replaces the
// user's older reset links. ErrNotFound when no such user.
func ResetLink(ctx context.Context, store Store, baseURL, email string, ttl time.Duration, now time.Time) (string, time.Time, error) {
	base, err := url.Parse(baseURL)
	if err != nil || base.Host == "" {
		return "", time.Time{}, fmt.Errorf("base URL %q is not an absolute URL", baseURL)
	}
	u, _, err := store.CredentialByEmail(ctx, strings.ToLower(email))
	if err != nil {
		return "", time.Time{}, err
	}
	tok, hash, err := newLinkToken()
	if err != nil {
		return "", time.Time{}, err
	}
	now = now.UTC().Truncate(timeUnit)
	t := RecoveryToken{Hash: hash, Kind: mail.PasswordReset, UserID: u.ID, Email: u.Email, ExpiresAt: now.Add(ttl), CreatedAt: now}
	if err := store.IssueRecoveryToken(ctx, t, mail.Queued{}); err != nil {
		return "", time.Time{}, err
	}
	return resetURL(base.Scheme+"://"+base.Host, "", tok), t.ExpiresAt, nil
}

// requestPasswordReset queues a reset link for a known address and answers
// every address alike, at once: the lookup and the queueing run after the
// answer, so its timing says nothing about the account either.
func (iss *Issuer) requestPasswordReset(w http.ResponseWriter, r *http.Request) *apiError {
	email, redirectTo, apiErr := iss.mailRequest(w, r, "redirectTo", errResetDisabled, errInvalidRedirect)
	if apiErr != nil {
		return apiErr
	}
	if !iss.rec.intake.run(r.Context(), func(ctx context.Context) {
		u, _, err := iss.store.CredentialByEmail(ctx, email)
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

// redirect answers 302 as Better Auth does (JSON content type, empty
// body), never cached, and with no Referer leaving the page: the URL may
// hold a token.
func redirect(w http.ResponseWriter, loc string) {
	h := w.Header()
	h.Set("Location", loc)
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusFound)
}

// withParam resolves ref against base and sets key=value in its query,
// replacing earlier values of key and keeping the other pairs in order
// (what URLSearchParams.set does).
func withParam(base, ref, key, value string) (string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(ref)
	if err != nil {
		return "", err
	}
	u = b.ResolveReference(u)
	var kept []string
	if u.RawQuery != "" {
		for _, pair := range strings.Split(u.RawQuery, "&") {
			k, _, _ := strings.Cut(pair, "=")
			if uk, err := url.QueryUnescape(k); err == nil && uk == key {
				continue
			}
			kept = append(kept, pair)
		}
	}
	kept = append(kept, url.QueryEscape(key)+"="+url.QueryEscape(value))
	u.RawQuery = strings.Join(kept, "&")
	u.ForceQuery = false
	return u.String(), nil
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
	u, ended, err := iss.store.ResetPassword(r.Context(), hash, pwHash, iss.rec.revoke, iss.now().UTC().Truncate(timeUnit))
	if errors.Is(err, ErrNotFound) {
		return errInvalidResetToken
	}
	if err != nil {
		return storeErr(err)
	}
	iss.log.Info("password reset by link", "user_id", u.ID, "sessions_ended", ended)
	return nil
}

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

// verifyEmail spends a verification token, marks the address verified and
// signs the user in (Better Auth's autoSignInAfterVerification).
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
	// Everything that can fail comes before the token is spent, and the
	// session is created in its transaction: a failure leaves the link
	// working.
	s, su, found, _, err := iss.lookup(r.Context(), r, true)
	if err != nil {
		return storeErr(err)
	}
	keep := ""
	if found {
		keep = su.ID
	}
	ns, err := iss.newSession(r, "", true)
	if err != nil {
		return errInternal(err)
	}
	u, wasVerified, err := iss.store.VerifyEmail(r.Context(), hashToken(tok), iss.now().UTC().Truncate(timeUnit), &ns, keep)
	if errors.Is(err, ErrNotFound) {
		return fail()
	}
	if err != nil {
		return storeErr(err)
	}
	switch {
	case wasVerified:
	case u.ID == keep:
		iss.setSessionCookie(w, s)
	default:
		ns.UserID = u.ID
		iss.setSessionCookie(w, ns)
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

// safeRedirect admits what a redirect may go to: a path on this origin or
// an absolute URL on a trusted origin. It refuses what browsers would read
// as another host: "//host", "/\host", "https:host", userinfo, encoded
// slashes and backslashes, control bytes and raw non-ASCII.
func (iss *Issuer) safeRedirect(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	if s[0] == '/' {
		if len(s) > 1 && s[1] == '/' {
			return false
		}
		// An encoded slash or backslash in the path may be decoded by
		// whatever serves it into "//host" (Better Auth refuses them too).
		path := s
		if i := strings.IndexAny(s, "?#"); i >= 0 {
			path = s[:i]
		}
		l := strings.ToLower(path)
		return !strings.Contains(l, "%2f") && !strings.Contains(l, "%5c")
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		return false
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	if authority == "" || strings.ContainsAny(authority, "@%") {
		return false
	}
	u, err := url.Parse(s)
	if err != nil || u.User != nil || u.Opaque != "" || u.Host != authority {
		return false
	}
	return iss.trusted[scheme+"://"+strings.ToLower(authority)]
}
