package issuer

import (
	"time"

	"github.com/authsidecar/authsidecar/mail"
	"github.com/authsidecar/authsidecar/revocation"
)

// The records below are what the admin CLI and "db copy" read and write
// through a store; the request path uses none of them. They live here,
// beside User and Session, so every store speaks the same types.

// UserSummary is a user and how many of its sessions have not expired.
type UserSummary struct {
	User
	LiveSessions int
}

// RoleGrant is one user_role row with its user's email.
type RoleGrant struct {
	UserID    string
	Email     string
	Role      string
	CreatedAt time.Time
}

// DeletedUser is what deleting a user removed: the user and, by ON DELETE
// CASCADE, its sessions, roles and accounts.
type DeletedUser struct {
	User     User
	Sessions int // every session row, live or expired
	Roles    int
}

// credentialProvider is the provider id of the password's account.
const credentialProvider = "credential"

// Account is one row of the account table: how a user signs in. The
// credential account holds the password hash; an identity provider's
// account holds the provider's tokens, sealed (see SealTokens).
type Account struct {
	ID         string
	AccountID  string // the provider's subject; the user id for "credential"
	ProviderID string // "credential" or a configured identity provider's id
	UserID     string
	Password   *string // nil for accounts without a password
	// AccessToken, RefreshToken and IDToken are sealed with a key derived
	// from AUTH_SECRET, bound to the row id; nil when the provider gave
	// none. A store never opens them.
	AccessToken, RefreshToken, IDToken []byte
	// AccessTokenExpiresAt and RefreshTokenExpiresAt are zero when unknown.
	AccessTokenExpiresAt, RefreshTokenExpiresAt time.Time
	// Scope is the granted scopes joined with "," (Better Auth's form).
	Scope     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Snapshot is every row a store holds that "db copy" moves: users,
// accounts, sessions, signing keys, roles, recovery tokens, the outbox and
// the revocations.
// Rate-limit buckets are not part of it: they refill by themselves.
type Snapshot struct {
	Users    []User
	Accounts []Account
	Sessions []Session
	Keys     []KeyRecord
	Roles    []RoleGrant // Email is informational; UserID is what is stored
	// RecoveryTokens move so that links already mailed keep working after
	// a move: they are hashes, no more secret than the session tokens.
	RecoveryTokens []RecoveryToken
	// Outbox moves whole: pending rows with their sealed payload (mail
	// queued before a move must not be lost; the payload opens with the
	// same AUTH_SECRET, as the signing keys do), delivered and dead rows
	// as the record "outbox list" shows. Leases do not move: the target's
	// workers claim the pending rows afresh.
	Outbox []mail.Queued
	// Revocations move with their ids, so a verifier's feed cursor and
	// every poller's stay meaningful; a revocation left behind would bring
	// the tokens it took back to life.
	Revocations []revocation.Record
	// OAuthStates move so that a sign-in with an identity provider begun
	// before the move finishes after it (they live 10 minutes).
	OAuthStates []OAuthState
}
