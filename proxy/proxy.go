package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/authsidecar/authsidecar/revocation"
)

// SessionLookup resolves the session cookie of a request to a user id, for
// the cookie-only routes. found is false when there is no live session; err
// means the store could not answer.
type SessionLookup interface {
	SessionUserID(ctx context.Context, r *http.Request) (userID string, found bool, err error)
}

// RoleLookup answers whether a user holds any of roles, in one query.
type RoleLookup interface {
	HasAnyRole(ctx context.Context, userID string, roles []string) (bool, error)
}

// Options configures a Proxy.
type Options struct {
	// Upstream is where authenticated requests go. Required.
	Upstream *url.URL
	// Auth serves /api/auth/* (the issuer). Required.
	Auth http.Handler
	// Verifier checks Bearer and ?token= JWTs. Required.
	Verifier Verifier
	// Revocations is checked after the Verifier on every token, cached
	// or not. Zero: tokens are never refused as revoked (a verifier whose
	// issuer has no feed).
	Revocations Revocations
	// Sessions serves the cookie-only routes. Required if CookieOnly is set.
	Sessions SessionLookup
	// Roles serves admin routes. Zero with Admin set: every admin route
	// answers 403, valid token or not. A proxy that cannot read roles (a
	// verifier without a database) must not forward what only a role
	// admits.
	Roles RoleLookup

	// IdentityHeader carries the verified user id upstream. Zero: "X-User-Id".
	IdentityHeader string
	// CookieOnly, Passthrough: exact paths, or prefixes when ending in "/".
	// WebSocketPrefixes: prefixes. Zero: none.
	CookieOnly, Passthrough, WebSocketPrefixes []string
	// Admin routes and the roles they demand. Zero: none.
	Admin []AdminRoute
	// StripHeaders are removed from every forwarded request, on top of the
	// built-in identity and legacy routing headers. Zero: none extra.
	StripHeaders []string
	// SessionCookieNames are removed from forwarded requests: the upstream
	// never needs the session. Zero: none removed.
	SessionCookieNames []string
	// ForwardAuthorization keeps the Authorization header on requests
	// authenticated with it. Zero: removed once verified (the identity
	// header says who the user is).
	ForwardAuthorization bool

	// TrustedOrigins get CORS headers on /api/*. Zero: none (no CORS).
	TrustedOrigins []string
	// CORSAllowCredentials sends Access-Control-Allow-Credentials: true.
	CORSAllowCredentials bool
	// CORSMaxAge is the preflight cache time. Zero: no Max-Age header.
	CORSMaxAge time.Duration

	// ResponseHeaderTimeout bounds the wait for the upstream's response
	// headers (not the body: SSE streams are not cut). Zero: 60s.
	ResponseHeaderTimeout time.Duration
	// StoreTimeout bounds the database work of one auth, cookie-only or
	// admin request: a stuck database answers 503, never hangs. Zero: 5s.
	StoreTimeout time.Duration
	// Transport sends requests upstream. Zero: NewUpstream with the
	// default bounds.
	Transport http.RoundTripper
	// TrustedProxies may send X-Forwarded-For/Host/Proto, which are then
	// extended instead of replaced. Zero: none (the client's own are
	// replaced).
	TrustedProxies []netip.Prefix
	// IPv6Prefix is the prefix length by which IPv6 clients are counted
	// against the upstream's per-client bound
	// (UpstreamOptions.MaxConnsPerClient). Zero: 64.
	IPv6Prefix int

	// BodyMinRate is the rate, in bytes per second, below which a client
	// sending a forwarded request's body, or taking the answer's body
	// while it holds an upstream connection, is cut off (408 for a body);
	// pace says how it is measured. Zero: DefaultBodyMinRate. Negative:
	// no minimum.
	BodyMinRate int64
	// BodyRateGrace is the silence a client may keep, at the start or at
	// any time, before BodyMinRate applies. Zero: DefaultBodyRateGrace.
	BodyRateGrace time.Duration
	// BodyBuffer: a forwarded request body of at most this many bytes is
	// read whole before the request takes an upstream connection, so a
	// slow small body never holds one; a larger one streams as it comes.
	// Zero: DefaultBodyBuffer. Negative: every body streams.
	BodyBuffer int64
	// AllowedHosts are the Host header values accepted (an entry without a
	// port admits any port). Zero: any host.
	AllowedHosts []string
	// Leeway is the verifier's clock skew on exp (auth.leeway): a
	// WebSocket tunnel opened with a token is closed at the token's exp
	// plus Leeway, when the verifier would start refusing it. Zero: at exp.
	Leeway time.Duration
	// Metrics, when set, counts upstream errors and tunnels closed for
	// expiry. Zero: not counted.
	Metrics *Metrics
	// Logger; zero: slog.Default().
	Logger *slog.Logger
}

// Proxy is the sidecar's request handler. Create it with New.
type Proxy struct {
	o        Options
	router   *router
	strip    headerStripper
	cors     *cors
	rp       *httputil.ReverseProxy
	upstream *url.URL
	log      *slog.Logger
	// identityKey is IdentityHeader in canonical form, set by map index.
	identityKey string
	// basePath is the upstream's path, without its trailing slash: the
	// forwarded path goes under it.
	basePath string
	// unsent are the client's headers relay never forwards: hop-by-hop,
	// forwarding, and the stripped ones a map lookup finds.
	unsent map[string]bool
	// keepTE: TE: trailers is forwarded when asked for (the strip list
	// may name TE). stripForwarded are the X-Forwarded-* the strip list
	// names: the sidecar sets them, then strips them, as rewrite does.
	keepTE         bool
	stripForwarded []string
	// shareWarned is when a client refused for its upstream share was
	// last logged (Unix ns): warnClientShare.
	shareWarned atomic.Int64
}

// New checks the options and returns the handler.
func New(o Options) (*Proxy, error) {
	if o.Upstream == nil || o.Upstream.Host == "" {
		return nil, errors.New("proxy: no upstream")
	}
	if o.Auth == nil || o.Verifier == nil {
		return nil, errors.New("proxy: Auth and Verifier are required")
	}
	if len(o.CookieOnly) > 0 && o.Sessions == nil {
		return nil, errors.New("proxy: cookie-only routes need a SessionLookup")
	}
	if o.IdentityHeader == "" {
		o.IdentityHeader = "X-User-Id"
	}
	if o.ResponseHeaderTimeout == 0 {
		o.ResponseHeaderTimeout = 60 * time.Second
	}
	if o.StoreTimeout == 0 {
		o.StoreTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.IPv6Prefix == 0 {
		o.IPv6Prefix = 64
	}
	if o.BodyMinRate == 0 {
		o.BodyMinRate = DefaultBodyMinRate
	}
	if o.BodyRateGrace == 0 {
		o.BodyRateGrace = DefaultBodyRateGrace
	}
	if o.BodyBuffer == 0 {
		o.BodyBuffer = DefaultBodyBuffer
	}
	if o.Transport == nil {
		o.Transport = NewUpstream(UpstreamOptions{ResponseHeaderTimeout: o.ResponseHeaderTimeout})
	}
	p := &Proxy{
		o:        o,
		router:   newRouter(o.CookieOnly, o.Passthrough, o.WebSocketPrefixes, o.Admin),
		strip:    newHeaderStripper(o.IdentityHeader, o.StripHeaders, o.SessionCookieNames),
		cors:     newCORS(o.TrustedOrigins, o.CORSAllowCredentials, o.CORSMaxAge),
		upstream: o.Upstream,
		log:      o.Logger,

		identityKey: http.CanonicalHeaderKey(o.IdentityHeader),
		basePath:    strings.TrimSuffix(o.Upstream.Path, "/"),
		unsent:      map[string]bool{},
	}
	for _, name := range slices.Concat(hopHeaders, clientForwarded) {
		p.unsent[name] = true
	}
	for name := range p.strip.drop {
		p.unsent[name] = true
	}
	p.keepTE = !p.strip.drops("Te")
	for _, name := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		if p.strip.drops(name) {
			p.stripForwarded = append(p.stripForwarded, name)
		}
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      o.Transport,
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.upstreamError,
		BufferPool:     bufferPool{},
		ErrorLog:       slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
	}
	return p, nil
}

// ServeHTTP canonicalizes, classifies, authenticates and forwards.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	info := Info(r.Context())
	if info == nil {
		r, info = WithInfo(r)
	}
	p.boundBody(w, r)
	if !hostAllowed(p.o.AllowedHosts, r.Host) {
		info.Class, info.Reason = ClassRejected, ReasonBadHost
		writeError(w, http.StatusBadRequest, "BAD_HOST", "Host not allowed")
		return
	}
	path, err := canonicalPath(r.RequestURI)
	if err == nil {
		info.Class, info.roles, err = p.router.classify(path)
	}
	if err != nil {
		info.Class, info.Reason = ClassRejected, ReasonBadPath
		p.log.Debug("request refused", "reason", ReasonBadPath, "error", err.Error())
		writeError(w, http.StatusBadRequest, "BAD_PATH", err.Error())
		return
	}
	info.path = path

	upgrade := hasUpgrade(r)
	if upgrade && !p.upgradeAllowed(r, info.Class) {
		info.Reason = ReasonBadUpgrade
		writeError(w, http.StatusBadRequest, "BAD_UPGRADE", "Upgrade not allowed here")
		return
	}
	if p.router.api.match(path) {
		if isPreflight(r) {
			p.cors.preflight(w, r)
			return
		}
		p.cors.headers(w, r)
	}

	switch info.Class {
	case ClassAuth:
		ctx, cancel := context.WithTimeout(r.Context(), p.o.StoreTimeout)
		defer cancel()
		p.o.Auth.ServeHTTP(w, r.WithContext(ctx))
		return
	case ClassCookieOnly:
		if !p.cookieOnly(w, r, info) {
			return
		}
	case ClassWebSocket:
		if !p.webSocket(w, r, info) {
			return
		}
		if t := info.tunnel; t != nil {
			if !p.admit(w, r, info) {
				return
			}
			p.forwardUpgrade(t.writer(w), r)
			if reason := info.CloseReason(); reason != "" {
				p.o.Metrics.tunnelClosed(reason)
			}
			return
		}
	case ClassAdmin:
		if !p.bearer(w, r, info) || !p.admin(w, r, info) {
			return
		}
	case ClassBusiness:
		if !p.bearer(w, r, info) {
			return
		}
	}
	if !p.admit(w, r, info) {
		return
	}
	if upgrade {
		p.forwardUpgrade(w, r) // a tunnel: ReverseProxy's upgrade handling
		return
	}
	p.relay(w, r, info)
}

// bearer verifies the Authorization header; on failure it answers 401.
func (p *Proxy) bearer(w http.ResponseWriter, r *http.Request, info *RequestInfo) bool {
	token, err := bearerToken(r.Header)
	if err == nil {
		info.bearer = true
		return p.verify(w, r, info, token)
	}
	p.refuse(w, info, err, reasonOf(err) != ReasonMissing)
	return false
}

func (p *Proxy) verify(w http.ResponseWriter, r *http.Request, info *RequestInfo, token string) bool {
	claims, err := p.o.Verifier.Verify(r.Context(), token)
	if err != nil {
		p.refuse(w, info, err, true)
		return false
	}
	if revs := p.o.Revocations; revs != nil {
		if err := revs.Check(claims.Revocation); err != nil {
			reason := ReasonRevoked
			if !errors.Is(err, revocation.ErrRevoked) {
				reason = ReasonRevocationsUnavailable
			}
			p.refuse(w, info, authErr(reason, err), true)
			return false
		}
	}
	info.UserID = claims.Subject
	if info.Class == ClassWebSocket && hasUpgrade(r) {
		// A zero Expires (a Verifier that did not say) closes the tunnel
		// at once: no known end is no licence to stay open.
		t := newWSTunnel(claims.Expires.Add(p.o.Leeway), p.log.With("user_id", claims.Subject))
		if revs := p.o.Revocations; revs != nil {
			t.watch = func() { t.watchRevocation(revs, claims.Revocation) }
		}
		info.tunnel = t
	}
	return true
}

func (p *Proxy) refuse(w http.ResponseWriter, info *RequestInfo, err error, tokenSent bool) {
	info.Reason = reasonOf(err)
	p.log.Info("authentication refused", "class", info.Class.String(), "reason", info.Reason, "error", err.Error())
	switch info.Reason {
	case ReasonUnavailable:
		writeError(w, http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE", "Authentication unavailable")
	case ReasonKeysUnavailable:
		keysUnavailable(w, err)
	case ReasonRevocationsUnavailable:
		revocationsUnavailable(w, err)
	default:
		unauthorized(w, tokenSent)
	}
}

// cookieOnly serves GET /api/mcp-oauth/authorize and its kind: reached by
// top-level navigation, which cannot carry Authorization, so the session
// cookie is the credential (one session lookup). A Bearer token is not.
func (p *Proxy) cookieOnly(w http.ResponseWriter, r *http.Request, info *RequestInfo) bool {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "Method not allowed")
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.o.StoreTimeout)
	defer cancel()
	uid, found, err := p.o.Sessions.SessionUserID(ctx, r)
	switch {
	case err != nil:
		info.Reason = ReasonUnavailable
		p.log.Error("session lookup failed", "error", err.Error())
		writeError(w, http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE", "Authentication unavailable")
		return false
	case !found || !validSubject(uid):
		info.Reason = ReasonNoSession
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "Unauthorized")
		return false
	}
	info.UserID = uid
	return true
}

// admin checks the verified user's role: one query per request, never
// cached, never read from the token (docs/protocol.md).
func (p *Proxy) admin(w http.ResponseWriter, r *http.Request, info *RequestInfo) bool {
	if p.o.Roles == nil {
		info.Reason = ReasonForbiddenRole
		p.log.Warn("admin route refused: no role can be read here (a verifier without a database); routes.admin: [] forwards these paths for an upstream that checks roles itself",
			"user_id", info.UserID, "roles", strings.Join(info.roles, ","))
		writeError(w, http.StatusForbidden, "FORBIDDEN", "Forbidden")
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.o.StoreTimeout)
	defer cancel()
	ok, err := p.o.Roles.HasAnyRole(ctx, info.UserID, info.roles)
	switch {
	case err != nil:
		info.Reason = ReasonUnavailable
		p.log.Error("role lookup failed", "error", err.Error())
		writeError(w, http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE", "Authorization unavailable")
		return false
	case !ok:
		info.Reason = ReasonForbiddenRole
		p.log.Info("role check refused", "user_id", info.UserID, "roles", strings.Join(info.roles, ","))
		writeError(w, http.StatusForbidden, "FORBIDDEN", "Forbidden")
		return false
	}
	return true
}

// webSocket takes the JWT from ?token= (browsers cannot set headers on a
// WebSocket) or else from Authorization; both at once is ambiguous.
func (p *Proxy) webSocket(w http.ResponseWriter, r *http.Request, info *RequestInfo) bool {
	tokens, err := queryTokens(r.URL.RawQuery)
	if err != nil {
		p.refuse(w, info, err, true)
		return false
	}
	switch {
	case len(tokens) > 1:
		p.refuse(w, info, authErr(ReasonMalformed, errors.New("more than one token query parameter")), true)
		return false
	case len(tokens) == 1 && len(r.Header.Values("Authorization")) > 0:
		p.refuse(w, info, authErr(ReasonMalformed, errors.New("token in both query and Authorization")), true)
		return false
	case len(tokens) == 1:
		info.token = true
		return p.verify(w, r, info, tokens[0])
	}
	return p.bearer(w, r, info)
}

// queryTokens returns every value of the "token" query parameter.
func queryTokens(rawQuery string) ([]string, error) {
	var out []string
	for part := range strings.SplitSeq(rawQuery, "&") {
		k, v, _ := strings.Cut(part, "=")
		if k != "token" {
			if uk, err := url.QueryUnescape(k); err != nil || uk != "token" {
				continue
			}
		}
		uv, err := url.QueryUnescape(v)
		if err != nil {
			return nil, authErr(ReasonMalformed, fmt.Errorf("token query parameter: %w", err))
		}
		out = append(out, uv)
	}
	return out, nil
}

// withoutToken removes every token parameter from a raw query, leaving the
// others byte for byte.
func withoutToken(rawQuery string) string {
	var b strings.Builder
	for part := range strings.SplitSeq(rawQuery, "&") {
		k, _, _ := strings.Cut(part, "=")
		if uk, err := url.QueryUnescape(k); err == nil && uk == "token" {
			continue
		}
		if part == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(part)
	}
	return b.String()
}
