package issuer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
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
	// KeyCooldown is the unknown-kid cooldown of the verifiers of this
	// issuer's JWTs (keys.cooldown): a key made by RotateKey is published
	// this long, and a few seconds more, before it signs, so whoever
	// meets its kid may fetch it. Zero: 30s.
	KeyCooldown time.Duration
	// OnNewKey is called with a newly created signing key before any JWT
	// signed with it is issued. Zero: nothing is called.
	OnNewKey func(PublicKey)
	// Providers are the identity providers users may sign in with
	// (sign-in/social); a running issuer changes them with Reload. Zero:
	// none, and the social routes answer as for an unknown provider. With
	// any, Store must also be an AccountStore.
	Providers []Provider
	// Registerer receives the issuer's metrics (sign-ins, sign-ups, JWTs
	// issued). Zero: not registered.
	Registerer prometheus.Registerer
	// Logger receives operational logs. Zero: slog.Default().
	Logger *slog.Logger
	// Now is the clock. Zero: time.Now.
	Now func() time.Time
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
	social     *social

	// Rebuilt by apply (New and each Reload): the limits, the origins
	// trusted, the client IP and the routes that close over them. hasher
	// is shared until PasswordHashConcurrency changes, and each per-IP
	// limiter until its rate or v6Bits does (keepLimiter).
	bodyBytes   int64
	trusted     map[string]bool
	csrf        *http.CrossOriginProtection
	hasher      *hasher
	routes      map[string]map[string]handlerFunc
	providers   map[string]Provider
	clientIP    func(*http.Request) string
	signInIP    *limiter
	signInMail  *sharedLimiter
	signUpIP    *limiter
	mailIP      *limiter
	mailAddr    *sharedLimiter
	tokenIP     *limiter
	pwCheckIP   *limiter
	pwCheckUser *sharedLimiter
	v6Bits      int
	bodyTimeout time.Duration
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
		hasher:     newHasher(o.PasswordCost, hashSlotCount(o.PasswordHashConcurrency)),
		log:        o.Logger,
		now:        o.Now,
		metrics:    newMetrics(o.Registerer),
		rec:        newRecovery(o.Recovery),
	}
	if iss.social, err = newSocial(o.Store, o.Secret, name); err != nil {
		return nil, err
	}
	if err := iss.apply(ReloadOptions{TrustedOrigins: o.TrustedOrigins, Limits: o.Limits, ClientIP: o.ClientIP, Providers: o.Providers}); err != nil {
		return nil, err
	}
	iss.jwtIssuer = o.JWTIssuer
	if iss.jwtIssuer == "" {
		iss.jwtIssuer = iss.origin
	}
	iss.sessions = &SessionReader{store: o.Store, cookies: iss.cookies, now: o.Now}
	iss.keys = newKeyring(o.Store, o.Secret, o.JWTTTL, o.KeyCooldown, o.Now, o.Logger, o.OnNewKey)

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

		"/sign-in/social":   {http.MethodPost: iss.signInSocial},
		"/link-social":      {http.MethodPost: iss.linkSocial},
		"/list-accounts":    {http.MethodGet: iss.listAccounts},
		"/unlink-account":   {http.MethodPost: iss.unlinkAccount},
		"/get-access-token": {http.MethodPost: iss.getAccessToken},
		"/error":            {http.MethodGet: iss.errorPage, http.MethodHead: iss.errorPage},
	}
}

// ReloadOptions are the Options a running issuer can change: what the
// origin check trusts and the limits. The zero values mean what they mean
// in Options.
type ReloadOptions struct {
	TrustedOrigins []string
	Limits
	ClientIP  func(*http.Request) string
	Providers []Provider
}

// Reload returns a new Issuer that serves with o's settings and shares
// everything else with iss: the store, the signing keys, cookies,
// metrics and the timing hash (so it costs no scrypt run and no query).
// iss is not changed, so requests it is serving finish with the settings
// they started with. A per-IP limit whose rate (and IPv6Prefix) did not
// change keeps its buckets, shared with iss, so a reload does not let a
// flood start afresh; a changed one starts empty. The per-email and
// per-user ones live in the store and keep their counts. A changed
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
// limiters (those whose settings changed start empty), the hashing slots
// when their number changed, the trusted origins and the client IP
// function.
func (iss *Issuer) apply(o ReloadOptions) error {
	l := o.Limits
	iss.bodyBytes = l.BodyBytes
	if iss.bodyBytes == 0 {
		iss.bodyBytes = 64 << 10
	}
	iss.bodyTimeout = l.BodyReadTimeout
	if iss.bodyTimeout == 0 {
		iss.bodyTimeout = 10 * time.Second
	}
	iss.v6Bits = l.IPv6Prefix
	if iss.v6Bits == 0 {
		iss.v6Bits = 64
	}
	if iss.v6Bits < 0 || iss.v6Bits > 128 {
		return fmt.Errorf("issuer: IPv6 prefix /%d is not between /1 and /128", l.IPv6Prefix)
	}
	if n := hashSlotCount(l.PasswordHashConcurrency); n != iss.hasher.slots.n {
		iss.hasher = newHasher(iss.hasher.params, n)
	}
	iss.clientIP = o.ClientIP
	if iss.clientIP == nil {
		iss.clientIP = peerIP
	}
	iss.signInIP = keepLimiter(iss.signInIP, l.SignInPerIP, iss.v6Bits, iss.now)
	iss.signInMail = newSharedLimiter(iss.store, l.SignInPerEmail, "signin_email:", iss.now)
	iss.signUpIP = keepLimiter(iss.signUpIP, l.SignUpPerIP, iss.v6Bits, iss.now)
	iss.mailIP = keepLimiter(iss.mailIP, l.MailPerIP, iss.v6Bits, iss.now)
	iss.mailAddr = newSharedLimiter(iss.store, l.MailPerEmail, "mail_email:", iss.now)
	iss.tokenIP = keepLimiter(iss.tokenIP, l.TokenPerIP, iss.v6Bits, iss.now)
	iss.pwCheckIP = keepLimiter(iss.pwCheckIP, l.PasswordCheckPerIP, iss.v6Bits, iss.now)
	iss.pwCheckUser = newSharedLimiter(iss.store, l.PasswordCheckPerUser, "password_user:", iss.now)
	iss.trusted = map[string]bool{}
	iss.csrf = http.NewCrossOriginProtection()
	for _, origin := range append([]string{iss.origin}, o.TrustedOrigins...) {
		if err := iss.csrf.AddTrustedOrigin(origin); err != nil {
			return fmt.Errorf("issuer: trusted origin: %w", err)
		}
		iss.trusted[origin] = true
	}
	if err := iss.setProviders(o.Providers); err != nil {
		return err
	}
	iss.routes = iss.routeTable()
	return nil
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
		// GET /reset-password/{token} and /callback/{provider}: the routes
		// with a parameter.
		if tok, found := strings.CutPrefix(sub, "/reset-password/"); found && tok != "" && !strings.Contains(tok, "/") {
			methods = map[string]handlerFunc{http.MethodGet: func(w http.ResponseWriter, r *http.Request) *apiError {
				return iss.resetPasswordCallback(w, r, tok)
			}}
		} else if id, found := strings.CutPrefix(sub, "/callback/"); found && id != "" && !strings.Contains(id, "/") {
			// Served whole here, cross-site POST included: the identity
			// provider's form_post is one, and it is only bounced to GET.
			iss.callback(w, r, id)
			return
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
	// The client's turn in the hashing queue: the key its per-IP limits
	// use, so one address (or IPv6 prefix) cannot starve the others.
	r = r.WithContext(withHashClient(r.Context(), clientKey(iss.clientIP(r), iss.v6Bits)))
	iss.bodyDeadline(w, r)
	// Cross-site protection for every state-changing request, before
	// anything is read or changed (origin.go).
	var apiErr *apiError
	if apiErr = iss.originCheck(r, sub); apiErr != nil {
		iss.log.Info("cross-origin request refused", "path", logPath(r.URL.Path), "code", apiErr.code,
			"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
	} else {
		if hashes[sub] {
			r = withStoreBudget(r)
		}
		apiErr = h(w, r)
	}
	switch sub {
	case "/sign-in/email":
		switch apiErr {
		case errRateLimited:
			iss.metrics.signins.WithLabelValues("rate_limited").Inc()
		case errLockedOut:
			iss.metrics.signins.WithLabelValues("locked_out").Inc()
		default:
			iss.metrics.signins.WithLabelValues(result(apiErr)).Inc()
		}
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

// RotateKey makes the next signing key. It is published at once and
// signs once it has been published longer than KeyCooldown; then the keys
// signing before stop, but stay in JWKS until the JWTs they signed have
// expired.
func (iss *Issuer) RotateKey(ctx context.Context) (PublicKey, error) {
	e, err := iss.keys.rotate(ctx)
	if err != nil {
		return PublicKey{}, err
	}
	return PublicKey{KID: e.rec.ID, Key: e.pub}, nil
}

// KeyView is how stored keys are judged without an issuer, for "check"
// and the "keys" commands: the Options of those names, with their zero
// values.
type KeyView struct {
	Secret      []byte
	JWTTTL      time.Duration
	KeyCooldown time.Duration
	Now         func() time.Time
	Logger      *slog.Logger
}

func (v KeyView) keyring(store Store) *keyring {
	if v.JWTTTL == 0 {
		v.JWTTTL = 30 * 24 * time.Hour
	}
	if v.Now == nil {
		v.Now = time.Now
	}
	if v.Logger == nil {
		v.Logger = slog.Default()
	}
	return newKeyring(store, v.Secret, v.JWTTTL, v.KeyCooldown, v.Now, v.Logger, nil)
}

// InspectKeys reports every stored key and whether it opens with the
// secret, without creating one.
func InspectKeys(ctx context.Context, store Store, v KeyView) ([]KeyInfo, error) {
	return v.keyring(store).inspect(ctx)
}

// InspectKeyRecords is InspectKeys on records already read, newest first:
// for "check", which reads them through a connection that cannot write
// rather than through a Store.
func InspectKeyRecords(recs []KeyRecord, v KeyView) []KeyInfo {
	k := v.keyring(nil)
	return k.describe(k.decodeAll(recs))
}

// storeErr maps a store failure to the client: the store could not answer
// (closed, locked past the deadline, disk gone). 503 says "try again"; the
// cause goes to the log only.
func storeErr(err error) *apiError {
	return errUnavailable(err)
}
