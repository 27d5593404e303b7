package proxy

import (
	"net/http"
	"slices"
	"strings"
)

// legacyHeaders are request headers that legacy backends and frameworks
// use to pick the route, the method or the client address. A client must
// not be able to set them through the sidecar.
var legacyHeaders = []string{
	"X-Original-Url", "X-Rewrite-Url", "X-Original-Uri",
	"X-Http-Method-Override", "X-Http-Method", "X-Method-Override",
	"X-Forwarded-Prefix", "X-Forwarded-Path", "X-Forwarded-Server", "X-Forwarded-Port", "X-Forwarded-Ssl", "X-Forwarded-Scheme",
	"X-Real-Ip", "True-Client-Ip", "X-Client-Ip", "X-Cluster-Client-Ip", "Cf-Connecting-Ip", "Fastly-Client-Ip",
	"X-User-Role",
}

// identityHeaders are request headers in which other authentication
// proxies, gateways and load balancers pass the signed-in user to the app
// behind them. An app moved behind the sidecar from one of them may still
// read one (a framework's "remote user" setting, a leftover middleware):
// a client must not be able to set them through the sidecar. The list is
// documented in docs/limits.md (TestIdentityHeadersDocumented).
var identityHeaders = []string{
	// Apache, nginx, Authelia, Kubernetes' request-header authentication.
	"Remote-User", "Remote-Email", "Remote-Name", "Remote-Groups",
	"X-Remote-User", "X-Remote-Email", "X-Remote-Group", "X-Remote-Groups", "X-Remote-Uid",
	// oauth2-proxy, nginx auth_request.
	"X-Forwarded-User", "X-Forwarded-Email", "X-Forwarded-Preferred-Username", "X-Forwarded-Groups", "X-Forwarded-Access-Token",
	"X-Auth-Request-User", "X-Auth-Request-Email", "X-Auth-Request-Preferred-Username", "X-Auth-Request-Groups", "X-Auth-Request-Access-Token",
	// Grafana's auth proxy, Vouch, authentik, Pomerium, Kong.
	"X-Webauth-User", "X-Webauth-Email", "X-Vouch-User",
	"X-Authentik-Username", "X-Authentik-Email", "X-Authentik-Uid", "X-Authentik-Groups", "X-Authentik-Name", "X-Authentik-Jwt",
	"X-Pomerium-Jwt-Assertion", "X-Authenticated-User", "X-Authenticated-Userid", "X-Authenticated-Email", "X-Authenticated-Groups",
	"X-Consumer-Id", "X-Consumer-Username",
	// Google IAP, Cloudflare Access, AWS ALB, Azure App Service.
	"X-Goog-Authenticated-User-Email", "X-Goog-Authenticated-User-Id", "X-Goog-Iap-Jwt-Assertion",
	"Cf-Access-Authenticated-User-Email", "Cf-Access-Jwt-Assertion",
	"X-Amzn-Oidc-Identity", "X-Amzn-Oidc-Data", "X-Amzn-Oidc-Accesstoken",
	"X-Ms-Client-Principal", "X-Ms-Client-Principal-Id", "X-Ms-Client-Principal-Name", "X-Ms-Client-Principal-Idp",
	// Hand-rolled gateways and app middleware.
	"X-User", "X-Userid", "X-User-Email", "X-Email", "X-Auth-User",
	// Client certificates as a TLS terminator passes them on.
	"X-Forwarded-Client-Cert", "X-Client-Cert", "X-Ssl-Client-Cert", "X-Ssl-Client-Verify", "X-Ssl-Client-S-Dn",
}

// identityPrefixes start header names that are identity headers whatever
// follows: Kubernetes' request-header authentication passes each "extra"
// attribute of the user (scopes, groups of a kind) as X-Remote-Extra-<key>.
// Documented beside identityHeaders.
var identityPrefixes = []string{"X-Remote-Extra-"}

// headerStripper removes, from every forwarded request, the client's
// copies of the identity header (in every spelling), every header whose
// name has an underscore (CGI, PHP and Rack fold "_" into "-", so
// "X_User_Id" would arrive as X-User-Id), the legacy routing headers, the
// identity headers other proxies set, and the session cookie.
type headerStripper struct {
	identity string
	drop     map[string]bool
	cookies  map[string]bool
}

func newHeaderStripper(identity string, extra, sessionCookies []string) headerStripper {
	s := headerStripper{identity: identity, drop: map[string]bool{}, cookies: map[string]bool{}}
	for _, h := range slices.Concat(legacyHeaders, identityHeaders, extra) {
		s.drop[http.CanonicalHeaderKey(h)] = true
	}
	for _, c := range sessionCookies {
		s.cookies[c] = true
	}
	return s
}

// sameHeader compares header names ignoring ASCII case and treating "_"
// as "-", without allocating (it runs for every header of every request).
func sameHeader(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == '_' {
			x = '-'
		}
		if y == '_' {
			y = '-'
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func (s headerStripper) apply(h http.Header) {
	for name := range h {
		if s.drop[name] || s.dropsSpelling(name) {
			delete(h, name)
		}
	}
	s.stripSessionCookie(h)
}

// drops reports whether a header name is stripped.
func (s headerStripper) drops(name string) bool { return s.drop[name] || s.dropsSpelling(name) }

// dropsSpelling is drops for what a map lookup of the canonical name
// cannot tell: the identity header in any spelling, underscores, and the
// identity headers named by a prefix.
func (s headerStripper) dropsSpelling(name string) bool {
	return strings.IndexByte(name, '_') >= 0 || sameHeader(name, s.identity) || identityPrefix(name)
}

// stripSessionCookie removes the session cookie from h's Cookie header.
func (s headerStripper) stripSessionCookie(h http.Header) {
	if len(s.cookies) > 0 {
		if vals := h["Cookie"]; len(vals) > 0 {
			s.stripCookies(h, vals)
		}
	}
}

// identityPrefix reports a canonical header name that starts with one of
// identityPrefixes.
func identityPrefix(name string) bool {
	for _, p := range identityPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// stripCookies drops the session cookie and keeps every other cookie as
// it was sent.
func (s headerStripper) stripCookies(h http.Header, vals []string) {
	var kept []string
	for _, line := range vals {
		for part := range strings.SplitSeq(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if part = strings.TrimSpace(part); part == "" || s.cookies[name] {
				continue
			}
			kept = append(kept, part)
		}
	}
	if len(kept) == 0 {
		h.Del("Cookie")
		return
	}
	h.Set("Cookie", strings.Join(kept, "; "))
}
