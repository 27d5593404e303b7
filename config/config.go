// Package config holds authsidecar's configuration: one YAML file, decoded
// strictly over [Default] and checked by [Config.Validate].
//
// Strict means an unknown key, a duplicate key, a value of the wrong type or a
// second YAML document is an error naming the file and line, so a typo such as
// "jwt_tll" fails at start-up instead of silently leaving the default in place.
// Validate reports every problem at once, each with its YAML path (and, through
// [Parse] or [Load], its line), so one edit-run cycle fixes them all.
//
// The secret (AUTH_SECRET) is not part of the file: it comes from the
// environment through [Config.LoadSecret] and is held in a [Secret], which
// redacts itself wherever it is printed, logged or marshalled.
//
// The shipped sidecar.yaml at the repository root documents every key and holds
// exactly the defaults; a test keeps it that way.
package config

// Config is the whole configuration. Build one with [Default] (then change
// fields) or with [Load]/[Parse]; the zero Config is not valid.
type Config struct {
	// Mode is "full" (default): the sidecar issues and verifies, serving
	// /api/auth/* from its own database; or "verifier": it only verifies,
	// against the public keys of Keys.JWKSURL, serves no /api/auth/*, and
	// needs no AUTH_SECRET and, by default, no database.
	Mode Mode `yaml:"mode"`
	// Listen is the host:port of the public listener. Default "127.0.0.1:8080":
	// loopback, because the sidecar normally sits behind a load balancer or
	// ingress on the same host. An empty host (":8080") listens on all
	// interfaces; port 0 picks a free port (tests).
	Listen string `yaml:"listen"`
	// BaseURL is the public URL clients use to reach the sidecar. Default
	// "http://localhost:8080". Its origin ([Config.BaseOrigin]) is the JWT
	// issuer and audience, so changing it invalidates every issued JWT; an
	// https scheme makes cookies Secure and "__Secure-"-prefixed.
	BaseURL string `yaml:"base_url"`
	// Upstream is the absolute http(s) URL of the application that business
	// requests are proxied to. Default "http://127.0.0.1:3000".
	Upstream string   `yaml:"upstream"`
	Database Database `yaml:"database"`
	Auth     Auth     `yaml:"auth"`
	Keys     Keys     `yaml:"keys"`
	Routes   Routes   `yaml:"routes"`
	CORS     CORS     `yaml:"cors"`
	Proxy    Proxy    `yaml:"proxy"`
	Limits   Limits   `yaml:"limits"`
	Metrics  Metrics  `yaml:"metrics"`
	Health   Health   `yaml:"health"`
	Log      Log      `yaml:"log"`
	Shutdown Shutdown `yaml:"shutdown"`
	Cache    Cache    `yaml:"cache"`
	Email    Email    `yaml:"email"`
	// Revocation is how revocations reach every process.
	Revocation Revocation `yaml:"revocation"`
	// Sweep is the deletion of what the database keeps for nothing.
	Sweep Sweep `yaml:"sweep"`
	// IdentityProviders are the OpenID Connect providers, Google and GitHub
	// users may sign in with, besides their password. Default empty: none.
	// Reloadable, whole: a reload that breaks any entry changes none.
	IdentityProviders []IdentityProvider `yaml:"identity_providers"`
	// Migration is how users of a legacy application come to the sidecar.
	Migration Migration `yaml:"migration"`
}

// Database says where users, sessions and signing keys are stored.
type Database struct {
	// Driver is the storage engine: "sqlite" (default in full mode), an
	// embedded file; "postgres", a server several replicas share; or
	// "none" (verifier mode only, and its default there).
	Driver Driver `yaml:"driver"`
	// Path is the SQLite database file. Default "authsidecar.db" (relative to
	// the working directory). Must not be empty. SQLite only.
	Path string `yaml:"path"`
	// URLEnv names the environment variable holding the PostgreSQL URL
	// (postgres://user:password@host:5432/db?sslmode=verify-full), so the
	// password is never in the file. Default "DATABASE_URL". PostgreSQL only.
	URLEnv string `yaml:"url_env"`
	// MaxConns is the PostgreSQL connection pool's size, from 1 to 1000.
	// Default 10. PostgreSQL only.
	MaxConns int `yaml:"max_conns"`
}

// Auth configures sign-in, sessions and the JWTs issued from them.
type Auth struct {
	// SecretEnv names the environment variable that holds the secret which
	// encrypts the signing keys at rest. Default "AUTH_SECRET". The secret is
	// never read from the file, so the file can be committed.
	SecretEnv string `yaml:"secret_env"`
	// JWTTTL is how long an issued JWT stays valid. Default 720h (30 days).
	// A JWT can be revoked before then (sign-out, a password change, a
	// ban: docs/revocation.md); a revocation is kept this long plus Leeway.
	JWTTTL Duration `yaml:"jwt_ttl"`
	// Leeway is the clock skew tolerated when checking exp, nbf and iat.
	// Default 30s. Zero means no tolerance. A WebSocket tunnel opened with
	// a JWT is closed at its exp plus Leeway.
	Leeway Duration `yaml:"leeway"`
	// SessionTTL is how long a cookie session lives without use. Default 168h
	// (7 days).
	SessionTTL Duration `yaml:"session_ttl"`
	// SessionUpdateAge is how old a session must be before a request extends
	// it; extending on every request would write to the database on every
	// get-session. Default 24h. Must be shorter than SessionTTL.
	SessionUpdateAge Duration `yaml:"session_update_age"`
	// CookieName is the session cookie's name. Default "auth.session_token".
	// When BaseURL is https the "__Secure-" prefix is added automatically, so
	// the name itself must not carry a "__Secure-" or "__Host-" prefix.
	CookieName string `yaml:"cookie_name"`
	// CookieSameSite is the session cookie's SameSite attribute: "lax",
	// "strict" or "none". Default "lax": GET /api/mcp-oauth/authorize is reached
	// by top-level navigation from another site, which "strict" would strip
	// the cookie from. "none" requires an https BaseURL (browsers drop
	// SameSite=None cookies that are not Secure).
	CookieSameSite SameSite `yaml:"cookie_same_site"`
	// MinPasswordLength is the shortest password sign-up accepts, in characters.
	// Default 8. At least 1.
	MinPasswordLength int `yaml:"min_password_length"`
	// MaxPasswordLength is the longest password accepted, in characters. Default
	// 128. At most 1024, which bounds the hashing work one request can cause.
	MaxPasswordLength int `yaml:"max_password_length"`
	// Issuer is the JWT iss and aud: issued tokens carry it and verified
	// tokens must. Default empty: BaseURL's origin in full mode, the origin
	// of Keys.JWKSURL in verifier mode (what Better Auth's jwt() plugin and
	// a full authsidecar put in their tokens).
	Issuer string `yaml:"issuer"`
	// TrustedOrigins are origins besides BaseURL's own that may make
	// credentialed cross-origin requests and pass the sign-in origin check.
	// Default empty: only BaseURL's origin. Each entry is exactly what a
	// browser sends in the Origin header: scheme://host[:port], lowercase, no
	// default port, path, trailing slash, query or userinfo; anything else
	// would never match.
	TrustedOrigins []string `yaml:"trusted_origins"`
	// ResetTokenTTL is how long a password-reset link works. Default 1h.
	// At least 1s.
	ResetTokenTTL Duration `yaml:"reset_token_ttl"`
	// VerificationTokenTTL is how long an email-verification link works.
	// Default 24h. At least 1s.
	VerificationTokenTTL Duration `yaml:"verification_token_ttl"`
	// RequireEmailVerification refuses sign-in (403 EMAIL_NOT_VERIFIED) to
	// users who have not followed a verification link, and makes sign-up
	// send that link instead of starting a session. Default false. Needs
	// Email.Delivery other than "off".
	RequireEmailVerification bool `yaml:"require_email_verification"`
	// SendVerificationOnSignin re-sends the verification link when an
	// unverified user signs in with the right password (and is refused).
	// Default false, as Better Auth's sendOnSignIn.
	SendVerificationOnSignin bool `yaml:"send_verification_on_signin"`
	// SignInAfterVerification makes a verification link sign in the
	// browser that opens it when that browser has no session (one signed
	// in as the same user keeps its session; one signed in as another
	// user keeps that one: the link never switches accounts). Default
	// false, as Better Auth's autoSignInAfterVerification: anyone can send
	// anyone a link for an address of their own, and a link that signs in
	// would put the victim in the sender's account (login CSRF), where
	// what they then store is the sender's to read.
	SignInAfterVerification bool `yaml:"sign_in_after_verification"`
	// RevokeSessionsOnPasswordReset ends every cookie session of a user
	// whose password is reset by link. Default true (Better Auth's default
	// is false): whoever had the old password may hold a session. Every
	// JWT of the user issued up to the reset is revoked with them; false
	// keeps sessions and JWTs alike.
	RevokeSessionsOnPasswordReset bool `yaml:"revoke_sessions_on_password_reset"`
	// RevokeJWTOnSignOut makes sign-out revoke the JWTs minted from its
	// session, everywhere within revocation.poll_interval. Default true.
	// False leaves them valid until they expire, as before revocation.
	RevokeJWTOnSignOut bool `yaml:"revoke_jwt_on_sign_out"`
	// AllowDeleteUser lets users delete their own account (POST
	// /api/auth/delete-user, with their password or from a session under a
	// day old); every JWT of theirs is revoked. Default false, as Better
	// Auth's user.deleteUser.enabled: the endpoint answers 404.
	AllowDeleteUser bool `yaml:"allow_delete_user"`
	// ResetPageURL is where a mailed reset link lands when the client gave
	// no redirectTo. Default empty: the sidecar's own page at
	// /api/auth/reset-password-page. Relative, or on base_url's origin or
	// a trusted origin.
	ResetPageURL string `yaml:"reset_page_url"`
	// BetterAuthSecretEnv names the environment variable holding the
	// BETTER_AUTH_SECRET of a Better Auth application whose database was
	// imported ("db import-better-auth"): its session cookies, signed with
	// that secret, keep their browsers signed in, and get-session gives
	// them the sidecar's cookie instead. The import reads it too, to open
	// Better Auth's signing keys. Default empty: no Better Auth cookie is
	// accepted. Remove it once the imported sessions have expired.
	BetterAuthSecretEnv string `yaml:"better_auth_secret_env"`
	// BetterAuthCookie is the Better Auth application's session cookie
	// name, without "__Secure-" (added on an https base_url, as Better
	// Auth adds it): "<cookiePrefix>.session_token". Default
	// "better-auth.session_token". Read only with BetterAuthSecretEnv.
	BetterAuthCookie string `yaml:"better_auth_cookie"`
}

// Keys configures the in-memory cache of public signing keys (JWKS).
type Keys struct {
	// MaxAge is how long fetched keys are trusted before they are fetched
	// again, so a rotated key is picked up. Default 10m.
	MaxAge Duration `yaml:"max_age"`
	// Cooldown is the least time between two fetches, so tokens with unknown
	// key ids cannot make every request hit the database. Default 30s.
	Cooldown Duration `yaml:"cooldown"`
	// JWKSURL is where a verifier fetches the public keys: an issuer's
	// /api/auth/jwks (this sidecar in full mode, or Better Auth with its
	// jwt() plugin). Required in verifier mode, refused in full mode (which
	// reads its own keys from the database). Default empty.
	JWKSURL string `yaml:"jwks_url"`
	// StaleIfError is how long, once the keys are older than MaxAge, a
	// verifier keeps using the last good keys while JWKSURL fails. After
	// that business requests get 503 KEYS_UNAVAILABLE until a fetch
	// succeeds. Default 1h. Verifier mode only.
	StaleIfError Duration `yaml:"stale_if_error"`
	// JWKSCAFile is a PEM bundle of extra CAs trusted for an https
	// JWKSURL, besides the system roots. Default empty: system roots only.
	JWKSCAFile string `yaml:"jwks_ca_file"`
	// RevocationsURL is where a verifier reads the issuer's revocations
	// (long-polled, signed with the JWKS key). Default "auto": JWKSURL
	// with its last path segment replaced by "revocations" (a full
	// authsidecar's /api/auth/revocations). Empty: the issuer has no feed
	// (Better Auth); tokens are then never refused as revoked here, and the
	// verifier says so at start. Verifier mode only; full mode reads its
	// own database.
	RevocationsURL string `yaml:"revocations_url"`
	// RevocationsStaleIfError is how long after its last successful read
	// of RevocationsURL a verifier keeps serving; past it business
	// requests get 503 REVOCATIONS_UNAVAILABLE (with Retry-After), never
	// 401, until a read succeeds. Default 5m. Verifier mode only.
	RevocationsStaleIfError Duration `yaml:"revocations_stale_if_error"`
}

// RevocationsAuto is Keys.RevocationsURL's default: derived from JWKSURL.
const RevocationsAuto = "auto"

// Revocation configures how a full sidecar learns of revocations other
// processes wrote (docs/revocation.md).
type Revocation struct {
	// PollInterval is how often a full sidecar reads new revocations from
	// the database: one indexed query per interval, whatever the traffic,
	// and the bound on how late another replica refuses a revoked JWT.
	// The process that writes a revocation applies it at once. Default
	// 1s. Between 100ms and 1m.
	PollInterval Duration `yaml:"poll_interval"`
}

// Sweep configures the deletion of rows nothing will read again
// (docs/operations.md#what-the-database-keeps): expired sessions, reset
// and verification tokens and sign-in flows, rate-limit buckets that have
// refilled, and revocations older than any token they cover. Full mode
// only: a verifier sweeps nothing.
type Sweep struct {
	// Interval is the time between two runs; each deletes everything
	// worthless at its start, in batches, and on PostgreSQL one replica
	// at a time runs. Default 1m. At least 1s.
	Interval Duration `yaml:"interval"`
}

// Routes classifies request paths. Entries are lowercase ASCII paths that
// start with "/" and contain no "..", "//", "?", "#", whitespace or control
// bytes: they are compared with a cleaned request path, which never contains
// those, so such an entry could never match.
type Routes struct {
	// IdentityHeader is the request header that carries the verified user id
	// to the upstream, which trusts it; so any copy sent by the client is
	// removed before proxying. Default
	// "X-User-Id". Must be a valid header name and not a header the proxy
	// itself relies on (Authorization, Cookie, Host, ...).
	IdentityHeader string `yaml:"identity_header"`
	// CookieOnly lists paths (exact, or a prefix when ending in "/")
	// authenticated by the session cookie
	// instead of a Bearer JWT, for top-level navigations that cannot send an
	// Authorization header. Default ["/api/mcp-oauth/authorize"], and empty
	// in verifier mode. Empty: no cookie-authenticated business route.
	CookieOnly []string `yaml:"cookie_only"`
	// Passthrough lists paths proxied without authentication because the
	// upstream authenticates them itself (/ws/browser uses a pairing token).
	// An entry ending in "/" is a prefix, any other entry an exact path.
	// Default ["/ws/browser"]. Empty: none.
	Passthrough []string `yaml:"passthrough"`
	// WebsocketPrefixes are path prefixes whose WebSocket upgrades carry the
	// JWT in the "token" query parameter, because browsers cannot set headers
	// on a WebSocket. The tunnel is closed when the JWT expires (exp plus
	// auth.leeway). Default ["/ws/"]. Empty: none.
	WebsocketPrefixes []string `yaml:"websocket_prefixes"`
	// Admin lists path prefixes that additionally require one of some roles,
	// checked against the database once per request. Default
	// [{prefix: "/api/admin/", roles: [admin]}]. A verifier without a
	// database cannot check roles: it answers these routes 403 (and refuses
	// them written out). Empty: no role checks, the paths are business
	// routes.
	Admin []AdminRoute `yaml:"admin"`
}

// AdminRoute restricts a path prefix to users holding any of Roles.
type AdminRoute struct {
	// Prefix is a path prefix under "/api/". Required.
	Prefix string `yaml:"prefix"`
	// Roles lists role names ([a-z0-9_-]+), any of which grants access.
	// Required: an empty list would admit nobody, which is better said by
	// not proxying the route at all.
	Roles []string `yaml:"roles"`
}

// CORS configures cross-origin responses for BaseURL's origin and
// Auth.TrustedOrigins.
type CORS struct {
	// AllowCredentials sends Access-Control-Allow-Credentials: true, which the
	// web client needs to send cookies to /api/auth/*. Default true.
	AllowCredentials bool `yaml:"allow_credentials"`
	// MaxAge is how long browsers may cache a preflight response. Default
	// 10m. Zero disables caching (every cross-origin call is preflighted).
	// Browsers cap it (Chromium at 2h).
	MaxAge Duration `yaml:"max_age"`
}

// Proxy configures forwarding to Upstream.
type Proxy struct {
	// ResponseHeaderTimeout bounds the wait for the upstream's response
	// headers. Default 60s. It does not bound streaming bodies (SSE), which
	// may last much longer once headers are sent.
	ResponseHeaderTimeout Duration `yaml:"response_header_timeout"`
	// UpstreamMaxConns bounds the requests in flight to the upstream, and
	// so the connections to it. Default 256. A response streamed for long
	// (SSE, a long poll) holds one all along; an open WebSocket tunnel
	// does not.
	UpstreamMaxConns int `yaml:"upstream_max_conns"`
	// UpstreamMaxPending bounds the requests waiting for one of those
	// connections; one more, or one still waiting after
	// ResponseHeaderTimeout, is answered 503 with Retry-After. Default 1024.
	UpstreamMaxPending int `yaml:"upstream_max_pending"`
	// UpstreamClientShare is the share of UpstreamMaxConns one client (an
	// IPv4 address, an IPv6 prefix of limits.ipv6_prefix) may hold in
	// flight or waiting; beyond it, 503 with Retry-After at once, so that
	// no single source takes every connection. Default 25%.
	UpstreamClientShare Percent `yaml:"upstream_client_share"`
	// BodyMinRate is the rate below which a client sending a forwarded
	// request's body gets 408, and one taking an answer while it holds an
	// upstream connection is cut off, once BodyRateGrace is spent (a
	// client may be silent for BodyRateGrace at a time; over any stretch
	// it must move BodyMinRate x (stretch - grace) bytes). Default 1KiB/s;
	// off: no minimum.
	BodyMinRate ByteRate `yaml:"body_min_rate"`
	// BodyRateGrace is the silence BodyMinRate allows. Default 10s.
	BodyRateGrace Duration `yaml:"body_rate_grace"`
	// BodyBuffer: a forwarded request body of at most this many bytes is
	// read whole before the request takes an upstream connection, so a
	// slow small body holds none. Default 65536; 0: every body streams.
	BodyBuffer int `yaml:"body_buffer"`
	// TrustedProxies lists the IPs or CIDRs (e.g. "10.0.0.0/8") of proxies
	// whose X-Forwarded-For is believed when finding the client IP for rate
	// limits. Default empty: the TCP peer is the client, and forwarded headers
	// are ignored, so a client cannot forge its address.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// AllowedHosts lists the Host header values (host or host:port) accepted
	// on the public listener. Default empty: any host.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// StripHeaders lists request headers removed from every forwarded
	// request, in addition to the built-in ones (client copies of the
	// identity header in any spelling, every header with "_" in its name,
	// X-User-Role, X-Original-URL, X-Rewrite-URL, X-HTTP-Method-Override,
	// X-Forwarded-Prefix, X-Real-IP, True-Client-IP and similar, and the
	// identity headers other auth proxies set: Remote-User,
	// X-Forwarded-User, X-Forwarded-Email, X-Auth-Request-User, ...; the
	// list is in docs/limits.md): name the headers your backend uses to
	// pick a route, a method, a client or a user. Default empty.
	StripHeaders []string `yaml:"strip_headers"`
	// ForwardAuthorization keeps the Authorization header on requests the
	// sidecar authenticated with it. Default false: once verified, the
	// Bearer token is removed, as Envoy's jwt_authn does by default; the
	// upstream learns the user from the identity header and never holds a
	// credential it could log or replay. Set true for an upstream that
	// reads the JWT itself.
	ForwardAuthorization bool `yaml:"forward_authorization"`
}

// Metrics configures the admin listener.
type Metrics struct {
	// Listen is the host:port of the admin listener serving /metrics,
	// /healthz and /readyz, kept off the public port. Default
	// "127.0.0.1:9090". Must differ from Config.Listen.
	Listen string `yaml:"listen"`
	// Pprof serves net/http/pprof under /debug/pprof/ on the admin
	// listener, for profiling a live process. Default false: profiles
	// reveal internals and cost CPU, so they are opt-in and never on the
	// public port.
	Pprof bool `yaml:"pprof"`
	// ReloadTokenEnv names an environment variable holding a bearer token
	// that POST /-/reload then requires (Authorization: Bearer <token>;
	// 401 without it). Default empty: no token, and reloading needs only
	// reaching the admin listener, which must never be exposed. The value
	// must be at least 16 bytes. Whatever this says, the admin listener
	// refuses every request a browser marks as sent by a page (an Origin
	// header, or Sec-Fetch-Site other than none).
	ReloadTokenEnv string `yaml:"reload_token_env"`
}

// Health configures the readiness probe.
type Health struct {
	// ReadyRequiresDatabase makes /readyz fail while the database cannot be
	// reached. Default true. False: /readyz only says the process is serving,
	// which suits deployments where business routes (which never touch the
	// database) should keep receiving traffic during a database outage.
	ReadyRequiresDatabase bool `yaml:"ready_requires_database"`
}

// Log configures the process logger.
type Log struct {
	// Format is "json" (one object per line, for log collectors) or "text"
	// (key=value, for people). Default "json".
	Format LogFormat `yaml:"format"`
	// Level is the least severe level logged: "debug", "info", "warn" or
	// "error". Default "info".
	Level LogLevel `yaml:"level"`
	// Access writes one info line per request (method, path, class,
	// status, duration, bytes, user id, reason, request id). Default true;
	// false leaves only the metrics, for the last bit of throughput.
	Access bool `yaml:"access"`
}

// Shutdown configures the drain on SIGTERM.
type Shutdown struct {
	// Grace is how long in-flight requests get to finish after SIGTERM before
	// connections are closed. Default 25s: under Kubernetes' default 30s
	// termination grace period, leaving time to close the database.
	Grace Duration `yaml:"grace"`
}

// Cache configures the cache of verified JWTs.
type Cache struct {
	// VerifiedTokens is how many verified JWTs are remembered so a repeated
	// token skips signature verification. Default 100000. Zero disables the
	// cache.
	VerifiedTokens int `yaml:"verified_tokens"`
}
