package proxy

import (
	"net/http"
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

// headerStripper removes, from every forwarded request, the client's
// copies of the identity header (in every spelling), every header whose
// name has an underscore (CGI, PHP and Rack fold "_" into "-", so
// "X_User_Id" would arrive as X-User-Id), the legacy routing headers, and
// the session cookie.
type headerStripper struct {
	identity string
	drop     map[string]bool
	cookies  map[string]bool
}

func newHeaderStripper(identity string, extra, sessionCookies []string) headerStripper {
	s := headerStripper{identity: identity, drop: map[string]bool{}, cookies: map[string]bool{}}
	for _, h := range append(append([]string(nil), legacyHeaders...), extra...) {
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
		if s.drop[name] || strings.IndexByte(name, '_') >= 0 || sameHeader(name, s.identity) {
			delete(h, name)
		}
	}
	if len(s.cookies) > 0 {
		if vals := h.Values("Cookie"); len(vals) > 0 {
			s.stripCookies(h, vals)
		}
	}
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
