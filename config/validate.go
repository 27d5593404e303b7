package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// fieldError is one problem found by Validate: the YAML path of the
// offending value and what is wrong with it. Parse turns the path into a line.
type fieldError struct {
	path string // "auth.jwt_ttl", "routes.admin[0].roles[1]"
	// alt is another path the problem involves (the other side of a
	// comparison); its line is used when path itself is not in the file.
	alt string
	msg string
}

func (e *fieldError) Error() string { return e.path + ": " + e.msg }

// problems collects fieldErrors so Validate can report all of them at once.
type problems []error

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, &fieldError{path: path, msg: fmt.Sprintf(format, args...)})
}

func (p *problems) addRelated(path, alt, format string, args ...any) {
	*p = append(*p, &fieldError{path: path, alt: alt, msg: fmt.Sprintf(format, args...)})
}

func (p *problems) check(path string, err error) {
	if err != nil {
		p.add(path, "%v", err)
	}
}

// Validate reports every problem in c, joined with errors.Join, each as
// "yaml.path: what is wrong". It does not modify c or read anything outside
// it, so a Config built in code validates the same as one read from a file.
func (c Config) Validate() error {
	var p problems
	oneOf(&p, "mode", c.Mode, ModeFull, ModeVerifier)
	p.check("listen", checkListen(c.Listen))
	p.check("base_url", checkHTTPURL(c.BaseURL))
	p.check("upstream", checkHTTPURL(c.Upstream))
	p.database(c.Database, c.Mode)
	p.auth(c.Auth, c.Secure())
	p.keys(c.Keys, c.Mode)
	p.routes(c.Routes)
	p.withoutDatabase(c)
	p.notNegative("cors.max_age", c.CORS.MaxAge)
	p.proxy(c.Proxy)
	p.limits(c.Limits)
	p.email(c)
	p.revocation(c.Revocation)
	p.atLeastSecond("sweep.interval", c.Sweep.Interval)
	p.identityProviders(c)
	p.migration(c)
	p.check("metrics.listen", checkListen(c.Metrics.Listen))
	if c.Metrics.ReloadTokenEnv != "" {
		p.check("metrics.reload_token_env", checkEnvName(c.Metrics.ReloadTokenEnv))
	}
	if c.Metrics.Listen == c.Listen && checkListen(c.Listen) == nil && !strings.HasSuffix(c.Listen, ":0") {
		p.addRelated("metrics.listen", "listen", "must differ from listen (both are %q)", c.Listen)
	}
	oneOf(&p, "log.format", c.Log.Format, FormatJSON, FormatText)
	oneOf(&p, "log.level", c.Log.Level, LevelDebug, LevelInfo, LevelWarn, LevelError)
	p.positive("shutdown.grace", c.Shutdown.Grace)
	if c.Cache.VerifiedTokens < 0 {
		p.add("cache.verified_tokens", "must not be negative (0 disables the cache), got %d", c.Cache.VerifiedTokens)
	}
	return errors.Join(p...)
}

func (p *problems) database(d Database, mode Mode) {
	switch d.Driver {
	case DriverSQLite:
		if mode == ModeVerifier {
			p.addRelated("database.driver", "mode", `"sqlite" cannot be shared with the issuers a verifier trusts: want "none" or "postgres"`)
		}
		if d.Path == "" {
			p.add("database.path", "must not be empty")
		}
	case DriverPostgres:
		p.check("database.url_env", checkEnvName(d.URLEnv))
		if d.MaxConns < 1 || d.MaxConns > maxConns {
			p.add("database.max_conns", "must be between 1 and %d, got %d", maxConns, d.MaxConns)
		}
	case DriverNone:
		if mode != ModeVerifier {
			p.addRelated("database.driver", "mode", `"none" is only for mode verifier: a full sidecar stores users, sessions and keys`)
		}
	default:
		p.add("database.driver", `must be "sqlite", "postgres" or "none", got %q`, d.Driver)
	}
}

// maxConns bounds database.max_conns: past it a fleet of replicas would
// exhaust any server's max_connections.
const maxConns = 1000

func (p *problems) keys(k Keys, mode Mode) {
	p.positive("keys.max_age", k.MaxAge)
	p.positive("keys.cooldown", k.Cooldown)
	p.positive("keys.stale_if_error", k.StaleIfError)
	switch {
	case mode == ModeVerifier:
		if k.JWKSURL == "" {
			p.addRelated("keys.jwks_url", "mode", "is required in mode verifier: the issuer's /api/auth/jwks, like https://auth.example.com/api/auth/jwks")
		} else {
			p.check("keys.jwks_url", checkHTTPURL(k.JWKSURL))
		}
	case k.JWKSURL != "":
		p.addRelated("keys.jwks_url", "mode", "is only for mode verifier: a full sidecar verifies with the keys in its own database")
	}
	if k.JWKSCAFile != "" && k.JWKSURL == "" {
		p.addRelated("keys.jwks_ca_file", "keys.jwks_url", "is only used with keys.jwks_url, which is not set")
	}
	p.positive("keys.revocations_stale_if_error", k.RevocationsStaleIfError)
	switch {
	case k.RevocationsURL == RevocationsAuto:
	case mode != ModeVerifier:
		p.addRelated("keys.revocations_url", "mode", `is only for mode verifier (leave it "auto"): a full sidecar reads revocations from its own database`)
	case k.RevocationsURL != "":
		p.check("keys.revocations_url", checkHTTPURL(k.RevocationsURL))
	}
}

// Poll interval bounds: below 100ms a fleet's polls are load for nothing;
// above a minute revocation is no longer "in seconds".
const (
	minPollInterval = Duration(100 * time.Millisecond)
	maxPollInterval = Duration(time.Minute)
)

func (p *problems) revocation(r Revocation) {
	if r.PollInterval < minPollInterval || r.PollInterval > maxPollInterval {
		p.add("revocation.poll_interval", "must be between %s and %s, got %s", minPollInterval, maxPollInterval, r.PollInterval)
	}
}

// withoutDatabase refuses routes that need a database when there is none:
// a cookie session can only be read from one. Admin routes are answered
// 403 there instead (writtenAdminRoutes refuses them written out).
func (p *problems) withoutDatabase(c Config) {
	if c.Database.Driver != DriverNone || !c.Verifier() {
		return // full mode refuses "none" itself
	}
	if len(c.Routes.CookieOnly) > 0 {
		p.addRelated("routes.cookie_only", "database.driver", `needs a database to look sessions up, and database.driver is "none": remove the routes or use the issuers' postgres database`)
	}
}

func (p *problems) auth(a Auth, secure bool) {
	p.check("auth.secret_env", checkEnvName(a.SecretEnv))
	if a.Issuer != "" {
		p.check("auth.issuer", checkIssuer(a.Issuer))
	}
	p.positive("auth.jwt_ttl", a.JWTTTL)
	p.notNegative("auth.leeway", a.Leeway)
	p.positive("auth.session_ttl", a.SessionTTL)
	p.positive("auth.session_update_age", a.SessionUpdateAge)
	if a.SessionTTL > 0 && a.SessionUpdateAge >= a.SessionTTL {
		p.addRelated("auth.session_update_age", "auth.session_ttl",
			"must be shorter than auth.session_ttl (%s), got %s; otherwise sessions expire before they are extended", a.SessionTTL, a.SessionUpdateAge)
	}
	p.check("auth.cookie_name", checkCookieName(a.CookieName))
	oneOf(p, "auth.cookie_same_site", a.CookieSameSite, SameSiteLax, SameSiteStrict, SameSiteNone)
	if a.CookieSameSite == SameSiteNone && !secure {
		p.addRelated("auth.cookie_same_site", "base_url", `"none" requires an https base_url: browsers drop SameSite=None cookies that are not Secure`)
	}
	switch {
	case a.MinPasswordLength < 1:
		p.add("auth.min_password_length", "must be at least 1, got %d", a.MinPasswordLength)
	case a.MinPasswordLength > a.MaxPasswordLength:
		p.addRelated("auth.min_password_length", "auth.max_password_length",
			"must not exceed auth.max_password_length (%d), got %d", a.MaxPasswordLength, a.MinPasswordLength)
	}
	if a.MaxPasswordLength > maxPasswordLength {
		p.add("auth.max_password_length", "must be at most %d, got %d", maxPasswordLength, a.MaxPasswordLength)
	}
	p.list("auth.trusted_origins", a.TrustedOrigins, checkOrigin)
	p.atLeastSecond("auth.reset_token_ttl", a.ResetTokenTTL)
	p.atLeastSecond("auth.verification_token_ttl", a.VerificationTokenTTL)
	if a.ResetPageURL != "" {
		p.check("auth.reset_page_url", checkResetPage(a.ResetPageURL))
	}
	if a.BetterAuthSecretEnv != "" {
		p.check("auth.better_auth_secret_env", checkEnvName(a.BetterAuthSecretEnv))
		p.check("auth.better_auth_cookie", checkCookieName(a.BetterAuthCookie))
	}
}

// atLeastSecond: link lifetimes are stored in milliseconds but meant in
// seconds at least; tests use 1s.
func (p *problems) atLeastSecond(path string, d Duration) {
	if d < Duration(time.Second) {
		p.add(path, "must be at least 1s, got %s", d)
	}
}

// checkResetPage wants a path on this origin or an absolute http(s) URL;
// whether its origin is trusted is checked against auth.trusted_origins
// when the issuer starts.
func checkResetPage(s string) error {
	if strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "//") && !strings.ContainsAny(s, "\\?#") {
		return nil
	}
	if err := checkHTTPURL(s); err != nil {
		return fmt.Errorf("want a path like /reset or an absolute URL: %w", err)
	}
	return nil
}

// maxPasswordLength bounds the bytes one sign-in hashes.
const maxPasswordLength = 1024

func (p *problems) routes(r Routes) {
	p.check("routes.identity_header", checkIdentityHeader(r.IdentityHeader))
	p.list("routes.cookie_only", r.CookieOnly, checkRoutePath)
	p.list("routes.passthrough", r.Passthrough, checkRoutePath)
	p.list("routes.websocket_prefixes", r.WebsocketPrefixes, checkRoutePath)
	prefixes := make([]string, len(r.Admin))
	for i, a := range r.Admin {
		prefixes[i] = a.Prefix
		path := "routes.admin[" + strconv.Itoa(i) + "]"
		if len(a.Roles) == 0 {
			p.add(path+".roles", "must list at least one role")
		}
		p.list(path+".roles", a.Roles, checkRole)
	}
	p.list("routes.admin[*].prefix", prefixes, checkAdminPrefix)
}

func (p *problems) proxy(x Proxy) {
	p.positive("proxy.response_header_timeout", x.ResponseHeaderTimeout)
	if x.UpstreamMaxConns < 1 || x.UpstreamMaxConns > maxUpstreamConns {
		p.add("proxy.upstream_max_conns", "must be between 1 and %d, got %d", maxUpstreamConns, x.UpstreamMaxConns)
	}
	if x.UpstreamMaxPending < 1 || x.UpstreamMaxPending > maxUpstreamPending {
		p.add("proxy.upstream_max_pending", "must be between 1 and %d, got %d", maxUpstreamPending, x.UpstreamMaxPending)
	}
	if x.UpstreamClientShare < 1 || x.UpstreamClientShare > 100 {
		p.add("proxy.upstream_client_share", "must be between 1%% and 100%%, got %s", x.UpstreamClientShare)
	}
	if x.BodyMinRate < 0 {
		p.add("proxy.body_min_rate", "must not be negative (off: no minimum), got %dB/s", int64(x.BodyMinRate))
	}
	if x.BodyRateGrace < Duration(time.Second) || x.BodyRateGrace > Duration(5*time.Minute) {
		p.add("proxy.body_rate_grace", "must be between 1s and 5m, got %s", x.BodyRateGrace)
	}
	if x.BodyBuffer < 0 || x.BodyBuffer > maxBodyBytes {
		p.add("proxy.body_buffer", "must be between 0 (every body streams) and %d (16 MiB), got %d", maxBodyBytes, x.BodyBuffer)
	}
	p.list("proxy.trusted_proxies", x.TrustedProxies, checkIPOrCIDR)
	p.list("proxy.allowed_hosts", x.AllowedHosts, checkHost)
	p.list("proxy.strip_headers", x.StripHeaders, checkStripHeader)
}

// Upstream pool bounds: each connection in use costs two goroutines and
// its buffers (~30 KiB), each waiting request its parsed request; past
// these the bound protects nothing.
const (
	maxUpstreamConns   = 65536
	maxUpstreamPending = 1 << 20
)

// Body limits: below 1 KiB a sign-up form no longer fits; above 16 MiB one
// request can pin real memory, and the sidecar only reads small JSON bodies.
const (
	minBodyBytes = 1 << 10
	maxBodyBytes = 16 << 20
)

// minIPv6Prefix: a /32 is what a registry allocates to a whole provider;
// grouping wider would count unrelated networks as one client.
const minIPv6Prefix = 32

func (p *problems) limits(l Limits) {
	if l.BodyBytes < minBodyBytes || l.BodyBytes > maxBodyBytes {
		p.add("limits.body_bytes", "must be between %d (1 KiB) and %d (16 MiB), got %d", minBodyBytes, maxBodyBytes, l.BodyBytes)
	}
	p.rate("limits.signin_per_email", l.SigninPerEmail)
	p.rate("limits.signin_per_ip", l.SigninPerIP)
	p.rate("limits.signup_per_ip", l.SignupPerIP)
	p.rate("limits.mail_per_email", l.MailPerEmail)
	p.rate("limits.mail_per_ip", l.MailPerIP)
	p.rate("limits.token_per_ip", l.TokenPerIP)
	p.rate("limits.password_check_per_user", l.PasswordCheckPerUser)
	p.rate("limits.password_check_per_ip", l.PasswordCheckPerIP)
	if l.IPv6Prefix < minIPv6Prefix || l.IPv6Prefix > 128 {
		p.add("limits.ipv6_prefix", "must be between %d and 128 (a prefix length; 64 groups each /64, 128 counts every address), got %d", minIPv6Prefix, l.IPv6Prefix)
	}
	if l.BodyReadTimeout < Duration(time.Second) || l.BodyReadTimeout > Duration(5*time.Minute) {
		p.add("limits.body_read_timeout", "must be between 1s and 5m, got %s", l.BodyReadTimeout)
	}
	if l.PasswordHashConcurrency < 0 {
		p.add("limits.password_hash_concurrency", "must not be negative (0 means GOMAXPROCS), got %d", l.PasswordHashConcurrency)
	}
}

// rate checks what the YAML form cannot express but a Rate built in code can.
func (p *problems) rate(path string, r Rate) {
	switch {
	case r.N < 0:
		p.add(path, "must not be negative (0 disables the limit), got %d", r.N)
	case r.N > 0 && r.Per <= 0:
		p.add(path, "window must be positive, got %s", r.Per)
	}
}

func (p *problems) positive(path string, d Duration) {
	if d <= 0 {
		p.add(path, "must be positive, got %s", d)
	}
}

func (p *problems) notNegative(path string, d Duration) {
	if d < 0 {
		p.add(path, "must not be negative, got %s", d)
	}
}

func oneOf[T ~string](p *problems, path string, v T, allowed ...T) {
	names := make([]string, len(allowed))
	for i, a := range allowed {
		if v == a {
			return
		}
		names[i] = string(a)
	}
	p.add(path, "must be %s, got %q", quoteAlternatives(names), v)
}

// list checks every entry of a list and reports duplicates, which are always
// a mistake: an edit meant for one entry that was made to a copy. A path
// containing "[*]" names a field of each element of a list of mappings.
func (p *problems) list(path string, entries []string, check func(string) error) {
	seen := make(map[string]int, len(entries))
	for i, e := range entries {
		at := entryPath(path, i)
		p.check(at, check(e))
		if first, dup := seen[e]; dup {
			p.add(at, "%q is a duplicate of %s", e, entryPath(path, first))
			continue
		}
		seen[e] = i
	}
}

func entryPath(path string, i int) string {
	if before, after, ok := strings.Cut(path, "[*]"); ok {
		return before + "[" + strconv.Itoa(i) + "]" + after
	}
	return path + "[" + strconv.Itoa(i) + "]"
}

// quoteAlternatives formats "a", "b" or "c".
func quoteAlternatives(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strconv.Quote(v)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
