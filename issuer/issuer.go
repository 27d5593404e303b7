package issuer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Options configures an Issuer. Only Store and Secret are required.
type Options struct {
	// Store holds users, sessions and keys. Required.
	Store Store
	// Secret is AUTH_SECRET: it signs cookies and encrypts private keys.
	// Required; changing it invalidates every key and session cookie.
	Secret []byte
	// BaseURL is the public URL. Its origin is the JWT iss and aud and is
	// trusted for cross-origin requests; https makes cookies Secure with
	// the "__Secure-" prefix. Zero: "http://localhost:8080".
	BaseURL string
	// JWTIssuer is the iss and aud of issued JWTs. Zero: BaseURL's origin.
	JWTIssuer string
	// TrustedOrigins may send state-changing requests cross-origin, besides
	// BaseURL's origin. Zero: none.
	TrustedOrigins []string
	// JWTTTL is the JWT lifetime. Zero: 30 days (the contract).
	JWTTTL time.Duration
	// SessionTTL is a session's lifetime. Zero: 7 days.
	SessionTTL time.Duration
	// SessionUpdateAge: get-session extends a session older than this.
	// Zero: 1 day.
	SessionUpdateAge time.Duration
	// CookieName is the session cookie's name before any "__Secure-"
	// prefix. Zero: "auth.session_token".
	CookieName string
	// CookieSameSite is the cookie's SameSite. Zero: Lax. None forces Secure.
	CookieSameSite http.SameSite
	// MinPasswordLength and MaxPasswordLength bound passwords in
	// characters. Zero: 8 and 128.
	MinPasswordLength, MaxPasswordLength int
	// Limits are the bounds and rates; a running issuer changes them
	// with Reload.
	Limits
	// Recovery turns on password reset and email verification by mail.
	// Zero: off.
	Recovery RecoveryOptions
	// ClientIP names the client of a request for rate limits and session
	// records. Zero: the TCP peer address. The proxy supplies one that
	// believes X-Forwarded-For only from trusted proxies.
	ClientIP func(*http.Request) string
	// PasswordCost is the scrypt cost. Zero: Better Auth's (N=16384, r=16, p=1).
	PasswordCost ScryptParams
	// OnNewKey is called with a newly created signing key before any JWT
	// signed with it is issued. Zero: nothing is called.
	OnNewKey func(PublicKey)
	// Registerer receives the issuer's metrics (sign-ins, sign-ups, JWTs
	// issued). Zero: not registered.
	Registerer prometheus.Registerer
	// Logger receives operational logs. Zero: slog.Default().
	Logger *slog.Logger
	// Now is the clock. Zero: time.Now.
	Now func() time.Time
}

// Limits bound what one client can make the issuer do. The zero value
// of each field is its default.
type Limits struct {
	// BodyBytes caps request bodies. Zero: 64 KiB.
	BodyBytes int64
	// PasswordHashConcurrency bounds simultaneous scrypt computations.
	// Zero: GOMAXPROCS.
	PasswordHashConcurrency int
	// SignInPerIP, SignInPerEmail and SignUpPerIP limit attempts with token
	// buckets (429 with Retry-After beyond). Zero: no limit. The per-email
	// buckets live in the store, shared by every replica on it; the per-IP
	// ones in this process.
	SignInPerIP, SignInPerEmail, SignUpPerIP Rate
	// MailPerIP limits the mail-sending endpoints per client IP (429
	// beyond); MailPerEmail limits mails per address in the store (over
	// it, nothing is queued and the answer does not change); TokenPerIP
	// limits uses of reset and verification links per client IP. Zero: no
	// limit.
	MailPerIP, MailPerEmail, TokenPerIP Rate
}

// Issuer serves /api/auth/*. Create it with New.
//
// Reload copies an Issuer: the fields in the first group are shared by
// every copy (one store, one key ring, one cookie codec, one set of
// metrics, one recovery intake), so a reload costs no query and no hash;
// the second group is what apply rebuilds from ReloadOptions, so each copy
// has its own.
type Issuer struct {
	// Shared by every Reload copy; set once by New.
	store     Store
	origin    string
	jwtIssuer string
	sessions  *SessionReader
	jwtTTL    time.Duration
	// sessionTTL and updateAge are a session's life and how often its
	// expiry moves; minPw and maxPw bound a new password.
	sessionTTL time.Duration
	updateAge  time.Duration
	minPw      int
	maxPw      int
	cookies    cookies
	keys       *keyring
	log        *slog.Logger
	now        func() time.Time
	dummyHash  string
	metrics    *metrics
	rec        *recovery

	// Rebuilt by apply (New and each Reload): the limits, the origins
	// trusted, the client IP and the routes that close over them. hasher
	// is shared until PasswordHashConcurrency changes.
	bodyBytes  int64
	trusted    map[string]bool
	csrf       *http.CrossOriginProtection
	hasher     *hasher
	routes     map[string]map[string]handlerFunc
	clientIP   func(*http.Request) string
	signInIP   *limiter
	signInMail *sharedLimiter
	signUpIP   *limiter
	mailIP     *limiter
	mailAddr   *sharedLimiter
	tokenIP    *limiter
}

type handlerFunc func(w http.ResponseWriter, r *http.Request) *apiError

// BasePath is where the issuer is mounted.
const BasePath = "/api/auth"

// New checks the options, makes sure a usable signing key exists (creating
// one on first start or after AUTH_SECRET rotation) and returns the issuer.
func New(ctx context.Context, o Options) (*Issuer, error) {
	if o.Store == nil {
		return nil, errors.New("issuer: no store")
	}
	if len(o.Secret) == 0 {
		return nil, errors.New("issuer: no secret")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.JWTTTL, 30*24*time.Hour)
	def(&o.SessionTTL, 7*24*time.Hour)
	def(&o.SessionUpdateAge, 24*time.Hour)
	if o.BaseURL == "" {
		o.BaseURL = "http://localhost:8080"
	}
	if o.CookieName == "" {
		o.CookieName = "auth.session_token"
	}
	if o.CookieSameSite == 0 || o.CookieSameSite == http.SameSiteDefaultMode {
		o.CookieSameSite = http.SameSiteLaxMode
	}
	if o.MinPasswordLength == 0 {
		o.MinPasswordLength = 8
	}
	if o.MaxPasswordLength == 0 {
		o.MaxPasswordLength = 128
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Recovery.RequireEmailVerification && o.Recovery.Sealer == nil {
		return nil, errors.New("issuer: email verification required but no way to queue mail (Recovery.Sealer)")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	base, err := url.Parse(o.BaseURL)
	if err != nil || base.Host == "" || (base.Scheme != "http" && base.Scheme != "https") {
		return nil, fmt.Errorf("issuer: base URL %q is not an absolute http(s) URL", o.BaseURL)
	}
	secure := base.Scheme == "https" || o.CookieSameSite == http.SameSiteNoneMode
	name := o.CookieName
	if base.Scheme == "https" {
		name = "__Secure-" + name
	}

	iss := &Issuer{
		store:      o.Store,
		origin:     base.Scheme + "://" + base.Host,
		jwtTTL:     o.JWTTTL,
		sessionTTL: o.SessionTTL,
		updateAge:  o.SessionUpdateAge,
		minPw:      o.MinPasswordLength,
		maxPw:      o.MaxPasswordLength,
		cookies:    cookies{secret: o.Secret, name: name, secure: secure, sameSite: o.CookieSameSite},
		hasher:     newHasher(o.PasswordCost, hashSlots(o.PasswordHashConcurrency)),
		log:        o.Logger,
		now:        o.Now,
		metrics:    newMetrics(o.Registerer),
		rec:        newRecovery(o.Recovery),
	}
	if err := iss.apply(ReloadOptions{TrustedOrigins: o.TrustedOrigins, Limits: o.Limits, ClientIP: o.ClientIP}); err != nil {
		return nil, err
	}
	iss.jwtIssuer = o.JWTIssuer
	if iss.jwtIssuer == "" {
		iss.jwtIssuer = iss.origin
	}
	iss.sessions = &SessionReader{store: o.Store, cookies: iss.cookies, now: o.Now}
	iss.keys = &keyring{
		store: o.Store, secret: o.Secret, jwtTTL: o.JWTTTL, now: o.Now, log: o.Logger,
		onNewKey: o.OnNewKey, decoded: map[string]*keyEntry{}, announced: map[string]bool{},
	}

	if p := iss.rec.resetPage; p != "" && !iss.safeRedirect(p) {
		return nil, fmt.Errorf("issuer: reset page %q is neither a path nor on base_url's origin or a trusted origin", p)
	}
	// Unknown emails are checked against this hash so that a sign-in costs
	// the same whether or not the account exists.
	if iss.dummyHash, err = iss.hasher.hash(ctx, "dummy password for timing"); err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	if _, err := iss.keys.signingKey(ctx); err != nil {
		return nil, fmt.Errorf("issuer: signing key: %w", err)
	}
	return iss, nil
}

// routeTable binds the handlers to iss: a copy made by Reload needs its
// own table, or it would serve with the original's settings.
func (iss *Issuer) routeTable() map[string]map[string]handlerFunc {
	return map[string]map[string]handlerFunc{
		"/sign-up/email":   {http.MethodPost: iss.signUp},
		"/sign-in/email":   {http.MethodPost: iss.signIn},
		"/get-session":     {http.MethodGet: iss.getSession, http.MethodHead: iss.getSession, http.MethodPost: iss.getSession},
		"/token":           {http.MethodGet: iss.token},
		"/jwks":            {http.MethodGet: iss.jwks, http.MethodHead: iss.jwks},
		"/sign-out":        {http.MethodPost: iss.signOut},
		"/change-password": {http.MethodPost: iss.changePassword},
		"/ok":              {http.MethodGet: iss.ok, http.MethodHead: iss.ok},

		"/request-password-reset":  {http.MethodPost: iss.requestPasswordReset},
		"/reset-password":          {http.MethodPost: iss.resetPassword},
		"/send-verification-email": {http.MethodPost: iss.sendVerificationEmail},
		"/verify-email":            {http.MethodGet: iss.verifyEmail},
		resetPagePath:              {http.MethodGet: iss.resetPageGet, http.MethodPost: iss.resetPagePost},
	}
}

// ReloadOptions are the Options a running issuer can change: what the
// origin check trusts and the limits. The zero values mean what they mean
// in Options.
type ReloadOptions struct {
	TrustedOrigins []string
	Limits
	ClientIP func(*http.Request) string
}

// Reload returns a new Issuer that serves with o's settings and shares
// everything else with iss: the store, the signing keys, cookies,
// metrics and the timing hash (so it costs no scrypt run and no query).
// iss is not changed, so requests it is serving finish with the settings
// they started with. The per-IP rate limits start afresh; the per-email
// ones live in the store and keep their counts. A changed
// PasswordHashConcurrency gives the new issuer its own hashing slots:
// while hashes started on iss finish, both sets may run.
func (iss *Issuer) Reload(o ReloadOptions) (*Issuer, error) {
	next := *iss
	if err := next.apply(o); err != nil {
		return nil, err
	}
	return &next, nil
}

// apply sets what ReloadOptions holds, for New and for Reload alike: the
// limiters (new buckets), the hashing slots when their number changed,
// the trusted origins and the client IP function.
func (iss *Issuer) apply(o ReloadOptions) error {
	l := o.Limits
	iss.bodyBytes = l.BodyBytes
	if iss.bodyBytes == 0 {
		iss.bodyBytes = 64 << 10
	}
	if n := hashSlots(l.PasswordHashConcurrency); n != cap(iss.hasher.sem) {
		iss.hasher = newHasher(iss.hasher.params, n)
	}
	iss.clientIP = o.ClientIP
	if iss.clientIP == nil {
		iss.clientIP = peerIP
	}
	iss.signInIP = newLimiter(l.SignInPerIP, iss.now)
	iss.signInMail = newSharedLimiter(iss.store, l.SignInPerEmail, "signin_email:", iss.now)
	iss.signUpIP = newLimiter(l.SignUpPerIP, iss.now)
	iss.mailIP = newLimiter(l.MailPerIP, iss.now)
	iss.mailAddr = newSharedLimiter(iss.store, l.MailPerEmail, "mail_email:", iss.now)
	iss.tokenIP = newLimiter(l.TokenPerIP, iss.now)
	iss.trusted = map[string]bool{}
	iss.csrf = http.NewCrossOriginProtection()
	for _, origin := range append([]string{iss.origin}, o.TrustedOrigins...) {
		if err := iss.csrf.AddTrustedOrigin(origin); err != nil {
			return fmt.Errorf("issuer: trusted origin: %w", err)
		}
		iss.trusted[origin] = true
	}
	iss.routes = iss.routeTable()
	return nil
}

// hashSlots is PasswordHashConcurrency with its default.
func hashSlots(n int) int {
	if n <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return n
}

// ServeHTTP routes /api/auth/* by hand: ServeMux would answer unknown
// methods with plain-text 405s and redirect unclean paths, and every
// answer here must be JSON.
func (iss *Issuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sub, ok := strings.CutPrefix(r.URL.Path, BasePath)
	if !ok || (sub != "" && sub[0] != '/') {
		iss.fail(w, r, errNotFound)
		return
	}
	methods, ok := iss.routes[sub]
	if !ok {
		// GET /reset-password/{token}: the one route with a parameter.
		if tok, found := strings.CutPrefix(sub, "/reset-password/"); found && tok != "" && !strings.Contains(tok, "/") {
			methods = map[string]handlerFunc{http.MethodGet: func(w http.ResponseWriter, r *http.Request) *apiError {
				return iss.resetPasswordCallback(w, r, tok)
			}}
		} else {
			iss.fail(w, r, errNotFound)
			return
		}
	}
	h, ok := methods[r.Method]
	if !ok {
		allow := make([]string, 0, len(methods))
		for m := range methods {
			allow = append(allow, m)
		}
		sort.Strings(allow)
		w.Header().Set("Allow", strings.Join(allow, ", "))
		iss.fail(w, r, &apiError{status: http.StatusMethodNotAllowed, code: "METHOD_NOT_ALLOWED", message: "Method not allowed"})
		return
	}
	// Cross-site protection for every state-changing request (it lets
	// GET/HEAD through, and non-browser clients that send neither Origin
	// nor Sec-Fetch-Site).
	var apiErr *apiError
	if err := iss.csrf.Check(r); err != nil {
		iss.log.Info("cross-origin request refused", "path", logPath(r.URL.Path), "origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		apiErr = errInvalidOrigin
	} else {
		apiErr = h(w, r)
	}
	switch sub {
	case "/sign-in/email":
		if apiErr == errRateLimited {
			iss.metrics.signins.WithLabelValues("rate_limited").Inc()
			break
		}
		iss.metrics.signins.WithLabelValues(result(apiErr)).Inc()
	case "/sign-up/email":
		if apiErr == errRateLimited {
			iss.metrics.signups.WithLabelValues("rate_limited").Inc()
			break
		}
		iss.metrics.signups.WithLabelValues(result(apiErr)).Inc()
	case "/request-password-reset", "/reset-password", "/send-verification-email", "/verify-email":
		iss.metrics.recovery.WithLabelValues(sub[1:], recoveryResult(apiErr)).Inc()
	}
	if apiErr != nil {
		iss.fail(w, r, apiErr)
	}
}

// logPath keeps a reset link's token out of log lines: opening the link
// does not spend it.
func logPath(p string) string {
	if tok, ok := strings.CutPrefix(p, BasePath+"/reset-password/"); ok && tok != "" {
		return BasePath + "/reset-password/[token]"
	}
	return p
}

func (iss *Issuer) fail(w http.ResponseWriter, r *http.Request, e *apiError) {
	if e == errBusy {
		// Overload, answered: a warning, not an error per request.
		iss.log.Warn("password hashing busy until the request deadline; answered 503", "path", logPath(r.URL.Path))
	} else if e.cause != nil {
		iss.log.Error("auth request failed", "path", logPath(r.URL.Path), "code", e.code, "error", e.cause.Error())
	}
	WriteError(w, e.status, e.code, e.message)
}

// PublicKeys returns the keys JWTs may be verified with: those whose
// private half decrypts with the current secret and that are still within
// publication. It reads the key records (one query).
func (iss *Issuer) PublicKeys(ctx context.Context) ([]PublicKey, error) {
	return iss.keys.publicKeys(ctx)
}

// HasSigningKey reports, without a query, whether a usable signing key is
// known (for readiness).
func (iss *Issuer) HasSigningKey() bool { return iss.keys.hasSigner() }

// RotateKey makes a new signing key; the old ones stop signing but stay
// in JWKS until the JWTs they signed have expired.
func (iss *Issuer) RotateKey(ctx context.Context) (PublicKey, error) {
	e, err := iss.keys.rotate(ctx)
	if err != nil {
		return PublicKey{}, err
	}
	return PublicKey{KID: e.rec.ID, Key: e.pub}, nil
}

// InspectKeys reports every stored key and whether it opens with secret,
// without creating one: for "check" and "keys list". Zero jwtTTL and now
// mean 30 days and time.Now.
func InspectKeys(ctx context.Context, store Store, secret []byte, jwtTTL time.Duration, now func() time.Time, log *slog.Logger) ([]KeyInfo, error) {
	if jwtTTL == 0 {
		jwtTTL = 30 * 24 * time.Hour
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	k := &keyring{store: store, secret: secret, jwtTTL: jwtTTL, now: now, log: log, decoded: map[string]*keyEntry{}, announced: map[string]bool{}}
	return k.inspect(ctx)
}

// InspectKeyRecords is InspectKeys on records already read, newest first:
// for "check", which reads them through a connection that cannot write
// rather than through a Store.
func InspectKeyRecords(recs []KeyRecord, secret []byte, jwtTTL time.Duration, now func() time.Time, log *slog.Logger) []KeyInfo {
	if jwtTTL == 0 {
		jwtTTL = 30 * 24 * time.Hour
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	k := &keyring{secret: secret, jwtTTL: jwtTTL, now: now, log: log, decoded: map[string]*keyEntry{}, announced: map[string]bool{}}
	return k.describe(k.decodeAll(recs))
}

// storeErr maps a store failure to the client: the store could not answer
// (closed, locked past the deadline, disk gone). 503 says "try again"; the
// cause goes to the log only.
func storeErr(err error) *apiError {
	return errUnavailable(err)
}
