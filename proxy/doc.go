// Package proxy is the sidecar's front door: it puts every request through
// canonical-or-reject path checks, classifies it into exactly one route
// class, authenticates it the way that class demands, and forwards it to
// the upstream with the verified user id in the identity header.
//
// Business routes (at least 95% of traffic) are verified locally against an
// in-memory key set: the package has no database handle, so they cannot
// query one. The few routes that need the database (the cookie-only route
// and admin role checks) reach it only through the small SessionLookup and
// RoleLookup interfaces declared here.
//
// A WebSocket tunnel opened with a JWT ends with it: at exp plus the
// leeway both peers get a close frame 1008 between two frames, then both
// connections are closed (tunnel.go).
package proxy
