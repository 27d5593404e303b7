package issuer

import (
	"context"
	"errors"
)

// Lazy migration (Auth0's automatic migration): a sign-in for an address
// the sidecar does not know asks the legacy application whether the
// email and password are one of its users; if they are, the user is
// created here with the legacy application's id and the password hashed
// the sidecar's way, and signed in (legacysignin.go).

// LegacySignIn asks the legacy application about an email and password.
// Package legacy implements it over HTTP.
type LegacySignIn interface {
	// SignIn returns the user the legacy application knows by email and
	// password. ErrLegacyRefused: it does not know them (a wrong password
	// or an unknown address); ErrLegacyUnavailable: no answer that says
	// (a 5xx, another status, a timeout, a transport error);
	// ErrLegacyInvalid: a 200 whose body is not a user (too large, not
	// JSON, fields of the wrong type). No error may hold the password.
	SignIn(ctx context.Context, email, password string) (LegacyUser, error)
}

// LegacyUser is the legacy application's user, as its answer says. The
// issuer validates it before storing anything (validLegacyUser).
type LegacyUser struct {
	// ID becomes the user id: the JWT's sub and the upstream's identity
	// header. ValidUserID must hold.
	ID string
	// Email must be the address signed in with (case aside).
	Email string
	// Name is the user's name; empty: the email's local part.
	Name string
	// EmailVerified: the legacy application vouches for the address.
	EmailVerified bool
	// Roles are granted as "roles grant" would ([a-z0-9_-]+ each).
	Roles []string
}

// Errors of LegacySignIn, possibly wrapped with the detail (a status,
// the decoding error).
var (
	ErrLegacyRefused     = errors.New("the legacy application refused the email and password")
	ErrLegacyUnavailable = errors.New("the legacy application gave no usable answer")
	ErrLegacyInvalid     = errors.New("the legacy application's answer is not a user")
)

// MigrationStore is what lazy migration needs from the database besides
// Store. sqlstore implements it.
type MigrationStore interface {
	// UserByEmail returns the user that claims the (lower-case) email,
	// with a password or not. ErrNotFound if none: an unclaimed address
	// (User.EmailUnclaimed) is not found.
	UserByEmail(ctx context.Context, email string) (User, error)
	// CreateMigratedUser inserts u with its own id, its credential
	// account holding passwordHash, the roles and, unless s.Token is
	// empty, the session s, in one transaction. ErrEmailTaken when a user
	// claims u.Email, ErrUserIDTaken when u.ID exists: nothing is stored.
	CreateMigratedUser(ctx context.Context, u User, passwordHash string, roles []string, s Session) error
}

// ErrUserIDTaken: a user with that id exists.
var ErrUserIDTaken = errors.New("user id already exists")

// setLegacy turns lazy migration on with l, or off when l is nil.
func (iss *Issuer) setLegacy(l LegacySignIn) error {
	iss.legacy, iss.migration = nil, nil
	if l == nil {
		return nil
	}
	ms, ok := iss.store.(MigrationStore)
	if !ok {
		return errors.New("issuer: lazy migration needs a store that creates migrated users (MigrationStore)")
	}
	iss.legacy, iss.migration = l, ms
	for _, r := range legacyResults {
		iss.metrics.legacy.WithLabelValues(r)
	}
	return nil
}
