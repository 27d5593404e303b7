package proxy

import (
	"slices"
	"strings"
)

// Class is a route class: it decides how a request is authenticated.
type Class uint8

// The route classes, in the order they are matched.
const (
	ClassRejected    Class = iota // refused before classification (bad path)
	ClassAuth                     // /api/auth/*: served by the issuer
	ClassCookieOnly               // session cookie, one session lookup
	ClassPassthrough              // no authentication
	ClassWebSocket                // JWT from ?token= or Authorization
	ClassAdmin                    // Bearer JWT plus one role query
	ClassBusiness                 // Bearer JWT, zero database queries
	ClassPublic                   // the app's pages and assets: no authentication
	ClassKeyset                   // not a route: the key cache's own store reads
	ClassRevocation               // not a route: the revocation poller's store reads
)

var classNames = [...]string{"rejected", "auth", "cookie_only", "passthrough", "websocket", "admin", "business", "public", "keyset", "revocation"}

// ClassNames lists every class's metric label value.
func ClassNames() []string { return slices.Clone(classNames[:]) }

// String returns the class name used in logs and metric labels.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "unknown"
}

// AdminRoute guards a path prefix with a set of roles.
type AdminRoute struct {
	// Prefix, e.g. "/api/admin/"; it also matches itself without the
	// trailing slash.
	Prefix string
	// Roles: holding any one of them admits the user.
	Roles []string
}

// matcher is one configured path: exact, or a prefix when it ends in "/".
//
// A matcher that protects what it matches (every class but passthrough,
// which lifts authentication, and auth, which the issuer serves) also
// covers its last segment extended with a dot: the prefix /api/admin/
// matches /api/admin.json and /api/admin.x/y, the exact path /api/reports
// matches /api/reports.json (but not /api/reports.json/x, as it does not
// match /api/reports/x). Upstreams read such paths as the protected one:
// Spring MVC's suffix pattern matching (on by default before 5.3) serves
// /api/admin.json from the /api/admin handler, and Windows drops a
// segment's trailing dots (which canonicalPath refuses anyway). Treating
// them as inside the route requires its credential; refusing them would
// lock admins out of legitimate .json paths.
type matcher struct {
	path   string // without trailing slash for prefixes
	prefix bool
	dotted bool // path + "." + anything is inside too
}

// newMatcher builds the matcher of a configured entry; protect says that
// the route requires something a near spelling must not skip.
func newMatcher(entry string, alwaysPrefix, protect bool) matcher {
	m := matcher{path: entry}
	if alwaysPrefix || (strings.HasSuffix(entry, "/") && len(entry) > 1) {
		m = matcher{path: strings.TrimSuffix(entry, "/"), prefix: true}
	}
	// "/" (exact) and "" (the prefix "/") have no last segment to extend.
	m.dotted = protect && m.path != "" && !strings.HasSuffix(m.path, "/")
	return m
}

// match looks at what follows the length of m.path first: one byte,
// which rules most paths out before any comparison.
func (m matcher) match(path string) bool {
	return len(path) >= len(m.path) && m.inside(path[len(m.path):]) && path[:len(m.path)] == m.path
}

// matchFold is match, ignoring ASCII case.
func (m matcher) matchFold(path string) bool {
	return len(path) >= len(m.path) && m.inside(path[len(m.path):]) && strings.EqualFold(path[:len(m.path)], m.path)
}

// inside reports whether a path that starts with m.path, followed by rest,
// is inside m: rest is empty, or starts a segment below a prefix, or
// extends the last segment with a dot. It runs for every configured route
// on every request: small enough to inline.
func (m matcher) inside(rest string) bool {
	if rest == "" {
		return true
	}
	if rest[0] == '/' {
		return m.prefix
	}
	return rest[0] == '.' && m.dotInside(rest)
}

// dotInside: a dot after the last segment is inside a dotted matcher,
// with what follows it for a prefix, within that segment for an exact
// path. Rarely reached, and kept out of line so that inside inlines.
//
//go:noinline
func (m matcher) dotInside(rest string) bool {
	return m.dotted && (m.prefix || strings.IndexByte(rest, '/') < 0)
}

// matches is match, or matchFold when fold is set.
func (m matcher) matches(path string, fold bool) bool {
	if fold {
		return m.matchFold(path)
	}
	return m.match(path)
}

// apiRoute is /api and everything under it, /api.json and /api.x/y
// included: the business class, and where CORS and the stricter escapes
// apply.
var apiRoute = matcher{path: "/api", prefix: true, dotted: true}

// router classifies canonical paths.
type router struct {
	auth        matcher
	api         matcher
	cookieOnly  []matcher
	passthrough []matcher
	websocket   []matcher
	admin       []adminMatcher
	all         []matcher // every configured path, for the case check
}

type adminMatcher struct {
	matcher
	roles []string
}

func newRouter(cookieOnly, passthrough, websocket []string, admin []AdminRoute) *router {
	r := &router{
		// Not dotted: /api/auth.x is no issuer endpoint, and stays a
		// business path (a JWT required) rather than reaching the issuer.
		auth: matcher{path: "/api/auth", prefix: true},
		api:  apiRoute,
	}
	for _, p := range cookieOnly {
		r.cookieOnly = append(r.cookieOnly, newMatcher(p, false, true))
	}
	for _, p := range passthrough {
		// Not dotted: a passthrough route lifts authentication, and a
		// near spelling of it must keep the class it had.
		r.passthrough = append(r.passthrough, newMatcher(p, false, false))
	}
	for _, p := range websocket {
		r.websocket = append(r.websocket, newMatcher(p, true, true))
	}
	for _, a := range admin {
		r.admin = append(r.admin, adminMatcher{matcher: newMatcher(a.Prefix, true, true), roles: a.Roles})
	}
	r.all = append(r.all, r.auth, r.api)
	r.all = append(r.all, r.cookieOnly...)
	r.all = append(r.all, r.passthrough...)
	r.all = append(r.all, r.websocket...)
	for _, a := range r.admin {
		r.all = append(r.all, a.matcher)
	}
	return r
}

// classify returns the class of a canonical path, the roles an admin
// route demands, or an error for a path that matches a configured path
// only when case is ignored (/API/tasks, /api/Admin/x): an upstream that
// matches routes case-insensitively would otherwise serve it unguarded.
// For the same reason a path that an upstream could read, after Unicode
// normalization or a second decoding, as a protected route it is not as
// written (/%EF%BC%A1pi/tasks, fullwidth A) is refused; see
// checkLookalikes.
func (r *router) classify(path string) (Class, []string, error) {
	for _, m := range r.all {
		if m.matchFold(path) && !m.match(path) {
			return ClassRejected, nil, errBadPath("path differs from a configured route only in case")
		}
	}
	class, admin := r.lookup(path, false)
	if needsLookalikeCheck(path) {
		if err := r.checkLookalikes(path, class, admin); err != nil {
			return ClassRejected, nil, err
		}
	}
	if class == ClassAdmin {
		return class, r.admin[admin].roles, nil
	}
	return class, nil, nil
}

// lookup returns the class of path and, for ClassAdmin, the index of the
// admin route that matched (-1 otherwise). With fold set, configured paths
// are matched ignoring ASCII case. classify and checkLookalikes share it so
// the order of the classes is written once.
func (r *router) lookup(path string, fold bool) (Class, int) {
	switch {
	case r.auth.matches(path, fold):
		return ClassAuth, -1
	case anyMatch(r.cookieOnly, path, fold):
		return ClassCookieOnly, -1
	case anyMatch(r.passthrough, path, fold):
		return ClassPassthrough, -1
	case anyMatch(r.websocket, path, fold):
		return ClassWebSocket, -1
	}
	for i, a := range r.admin {
		if a.matches(path, fold) {
			return ClassAdmin, i
		}
	}
	if r.api.matches(path, fold) {
		return ClassBusiness, -1
	}
	return ClassPublic, -1
}

func anyMatch(ms []matcher, path string, fold bool) bool {
	for _, m := range ms {
		if m.matches(path, fold) {
			return true
		}
	}
	return false
}
