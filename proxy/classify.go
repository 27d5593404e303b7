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
type matcher struct {
	path   string // without trailing slash for prefixes
	prefix bool
}

func newMatcher(entry string, alwaysPrefix bool) matcher {
	if alwaysPrefix || (strings.HasSuffix(entry, "/") && len(entry) > 1) {
		return matcher{path: strings.TrimSuffix(entry, "/"), prefix: true}
	}
	return matcher{path: entry}
}

func (m matcher) match(path string) bool {
	if !m.prefix {
		return path == m.path
	}
	return strings.HasPrefix(path, m.path) && (len(path) == len(m.path) || path[len(m.path)] == '/')
}

// matchFold is match, ignoring ASCII case.
func (m matcher) matchFold(path string) bool {
	if !m.prefix {
		return strings.EqualFold(path, m.path)
	}
	return hasPrefixFold(path, m.path)
}

// matches is match, or matchFold when fold is set.
func (m matcher) matches(path string, fold bool) bool {
	if fold {
		return m.matchFold(path)
	}
	return m.match(path)
}

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
		auth: matcher{path: "/api/auth", prefix: true},
		api:  matcher{path: "/api", prefix: true},
	}
	for _, p := range cookieOnly {
		r.cookieOnly = append(r.cookieOnly, newMatcher(p, false))
	}
	for _, p := range passthrough {
		r.passthrough = append(r.passthrough, newMatcher(p, false))
	}
	for _, p := range websocket {
		r.websocket = append(r.websocket, newMatcher(p, true))
	}
	for _, a := range admin {
		r.admin = append(r.admin, adminMatcher{matcher: newMatcher(a.Prefix, true), roles: a.Roles})
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
