package issuer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
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
	// BetterAuthCookie is the session cookie of the Better Auth
	// application whose database was imported: a browser holding one is
	// signed in, and get-session gives it this issuer's cookie instead.
	// Zero: none is accepted.
	BetterAuthCookie BetterAuthCookie
	// MinPasswordLength and MaxPasswordLength bound passwords in
	// characters. Zero: 8 and 128.
	MinPasswordLength, MaxPasswordLength int
	// Limits are the bounds and rates; a running issuer changes them
	// with Reload.
	Limits
	// Recovery turns on password reset and email verification by mail.
	// Zero: off.
	Recovery RecoveryOptions
	// Accounts is what users may do with their sessions and account.
	// Zero: sign-out revokes its JWTs, delete-user is off.
	Accounts AccountOptions
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
	// Legacy, when set, turns on lazy migration: a sign-in for an address
	// no user claims asks it, and a user it knows is created here with
	// its id (legacysignin.go). A running issuer changes it with Reload.
	// Zero: off. With it, Store must also be a MigrationStore.
	Legacy LegacySignIn
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
	acct       AccountOptions
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
	legacy      LegacySignIn   // nil: lazy migration off
	migration   MigrationStore // the store, when legacy is set
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
		cookies:    cookies{secret: o.Secret, name: name, secure: secure, sameSite: o.CookieSameSite}.withBetterAuth(o.BetterAuthCookie, base.Scheme == "https"),
		hasher:     newHasher(o.PasswordCost, hashSlotCount(o.PasswordHashConcurrency)),
		log:        o.Logger,
		now:        o.Now,
		metrics:    newMetrics(o.Registerer),
		rec:        newRecovery(o.Recovery),
		acct:       o.Accounts,
	}
	if iss.social, err = newSocial(o.Store, o.Secret, name); err != nil {
		return nil, err
	}
	if err := iss.apply(ReloadOptions{TrustedOrigins: o.TrustedOrigins, Limits: o.Limits, ClientIP: o.ClientIP, Providers: o.Providers, Legacy: o.Legacy}); err != nil {
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

// storeErr maps a store failure to the client: the store could not answer
// (closed, locked past the deadline, disk gone). 503 says "try again"; the
// cause goes to the log only.
func storeErr(err error) *apiError {
	return errUnavailable(err)
}
