package issuer

import (
	"context"
	"errors"
	"time"

	"github.com/authsidecar/authsidecar/mail"
)

// User is the identity a JWT names. Only ID is authoritative for
// authorization: the other fields are a snapshot copied into JWTs.
type User struct {
	ID            string
	Name          string
	Email         string // always lower case
	EmailVerified bool
	// EmailUnclaimed: the address came from an identity provider that did
	// not say it was verified (trust_unverified_email). It is shown, but
	// it reserves nothing: a password sign-up with it makes another user,
	// lookups by email (sign-in, reset, verification mail, linking by
	// email, the admin commands while a user claims it) never find this
	// user, and no mail is sent to it.
	EmailUnclaimed bool
	Image          *string // nil when unset
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// Ban is set by an operator ("users ban"): a banned user cannot sign
	// in, and every session and JWT it held was revoked with the ban.
	Ban Ban
}

// Ban is a user's ban, named as Better Auth's admin plugin names its
// fields. The zero Ban is none.
type Ban struct {
	Banned  bool
	Reason  string    // empty: none given
	Expires time.Time // zero: never
}

// Active reports whether the ban holds at now: set, and not expired.
func (b Ban) Active(now time.Time) bool {
	return b.Banned && (b.Expires.IsZero() || now.Before(b.Expires))
}

// Session is a cookie session record. Token is the secret the cookie carries.
type Session struct {
	ID        string
	Token     string
	UserID    string
	ExpiresAt time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
	IPAddress string
	UserAgent string
	// Remember is false for rememberMe:false sign-ins: the cookie then has no
	// Max-Age and the session is never extended, as in Better Auth.
	Remember bool
}

// KeyRecord is one row of the jwks table, exactly as stored.
type KeyRecord struct {
	ID         string // the JWT kid
	PublicKey  string // public JWK JSON {"crv","x","kty"}
	PrivateKey string // hex(nonce‖ciphertext‖tag), optionally as a JSON string literal
	CreatedAt  time.Time
	ExpiresAt  time.Time // zero: signs until a newer key exists
	Alg        string    // empty means EdDSA
	Crv        string    // empty means Ed25519
}

// Proof is what a mailed link did besides proving an address: a reset,
// a verification or a change of address.
//
// Who follows such a link shows the address is theirs, and an address
// proven for the first time may have been someone else's claim until now
// (a sign-up with another person's address, never verified). Identity
// provider accounts linked to the user before that proof were linked by
// whoever held the account then: they are removed with it, so an
// attacker's provider account cannot sign in to the user the owner has
// just recovered. Password reset also ends the sessions (as
// auth.revoke_sessions_on_password_reset says).
type Proof struct {
	// WasVerified: the address was verified before (a change of address
	// counts as verified: it signs nobody in).
	WasVerified bool
	// SessionsEnded is how many sessions a reset deleted.
	SessionsEnded int
	// Unlinked are the provider ids of the accounts removed.
	Unlinked []string
}

// Store is what the issuer needs from the database. Every method that
// writes commits before it returns.
type Store interface {
	// CreateUser inserts the user, its credential account and its first
	// session in one transaction. ErrEmailTaken if the email exists.
	CreateUser(ctx context.Context, u User, passwordHash string, s Session) error
	// CredentialByEmail returns the user and its password hash. ErrNotFound
	// when no user (or no password credential) has that email.
	CredentialByEmail(ctx context.Context, email string) (User, string, error)
	// PasswordHash returns the user's password hash, ErrNotFound if none.
	PasswordHash(ctx context.Context, userID string) (string, error)
	// SetPassword replaces the user's password hash.
	SetPassword(ctx context.Context, userID, hash string, now time.Time) error
	CreateSession(ctx context.Context, s Session) error
	// CreateSessionRehashed stores s as CreateSession does and, in the
	// same transaction, replaces the password hash of s.UserID with
	// newHash if it is still oldHash (the first sign-in with a hash of
	// another system's format upgrades it to the sidecar's own). A hash
	// that changed meanwhile (another sign-in upgraded it first, a
	// password change) is left as it is, and replaced is false.
	CreateSessionRehashed(ctx context.Context, s Session, oldHash, newHash string) (replaced bool, err error)
	// SessionByToken returns the session and its user, ErrNotFound if none.
	SessionByToken(ctx context.Context, token string) (Session, User, error)
	ExtendSession(ctx context.Context, id string, expiresAt, now time.Time) error
	// DeleteSession deletes by token; deleting nothing is not an error.
	// It revokes nothing: it drops expired sessions.
	DeleteSession(ctx context.Context, token string) error
	Keys(ctx context.Context) ([]KeyRecord, error)
	InsertKey(ctx context.Context, k KeyRecord) error
	// SetKeyExpiry sets a key's expires_at (the end of its signing period).
	SetKeyExpiry(ctx context.Context, kid string, at time.Time) error
	// LockKeys serializes key creation among every process sharing the
	// store, so replicas starting together on an empty database make one
	// signing key, not one each. unlock must be called exactly once.
	LockKeys(ctx context.Context) (unlock func(), err error)
	// TakeToken takes one token from the token bucket named key, shared by
	// every process on the store, reading and writing it in one
	// transaction with r.Take. wait is zero when a token was taken, else
	// how long until one is available.
	TakeToken(ctx context.Context, key string, r Rate, now time.Time) (wait time.Duration, err error)

	// IssueRecoveryToken, in one transaction, deletes the user's other
	// tokens of t.Kind (a new link replaces the older ones), stores t and,
	// unless q.ID is empty, queues the outbox row q.
	IssueRecoveryToken(ctx context.Context, t RecoveryToken, q mail.Queued) error
	// ResetTokenValid reports whether a reset token with this hash exists
	// and has not expired, without spending it.
	ResetTokenValid(ctx context.Context, hash [32]byte, now time.Time) (bool, error)
	// ResetPassword, in one transaction, spends the reset token
	// (ErrNotFound when missing or expired, or when the user's address is
	// unclaimed), deletes the user's other reset tokens, writes the
	// password hash into the credential account, marks the email verified
	// and, when revokeSessions, deletes every session of the user and
	// revokes every JWT of the user issued up to now. When the address was
	// not verified before, the user's provider accounts are removed (see
	// Proof). It returns the user as it now is and what else was done.
	ResetPassword(ctx context.Context, hash [32]byte, passwordHash string, revokeSessions bool, now time.Time) (User, Proof, error)
	// VerifyEmail, in one transaction, spends the verification token
	// (ErrNotFound when missing, expired, the user's email is no longer
	// the one it was sent to, or it is unclaimed), marks the email
	// verified and deletes the user's other verification tokens. When the
	// address was not verified before, the user's provider accounts are
	// removed and, when signIn is not nil, the same transaction inserts
	// *signIn as a session of the token's user (UserID set to them),
	// unless the user is banned: a failure then leaves the token unspent.
	// A change-of-address token (KindChangeEmail) moves the user to the
	// address it was mailed to, verified, removing the provider accounts,
	// and signs nobody in.
	VerifyEmail(ctx context.Context, hash [32]byte, now time.Time, signIn *Session) (User, Proof, error)

	SessionStore
}

// SessionStore is what the endpoints users control their sessions and
// account with need (list-sessions, revoke-session(s), change-password,
// update-user, change-email, delete-user). A revocation is written in the
// transaction of what causes it: revoking a session revokes every JWT
// minted from it (the JWT's sid), revoking a user every JWT of the user
// issued up to now.
type SessionStore interface {
	// Sessions returns the user's sessions that expire after now, oldest
	// first.
	Sessions(ctx context.Context, userID string, now time.Time) ([]Session, error)
	// EndSession deletes the session with token, only if it belongs to
	// userID when userID is not empty, and when revoke revokes the JWTs
	// minted from it, in one transaction. ended is false when there was no
	// such session.
	EndSession(ctx context.Context, token, userID string, revoke bool, now time.Time) (ended bool, err error)
	// EndSessions deletes every session of userID but the one with
	// keepToken (all of them when it is empty) and, in the same
	// transaction, revokes: with cutoff, every JWT of the user issued up to
	// now; without, the JWTs of each session it deleted. It returns how
	// many sessions it deleted.
	EndSessions(ctx context.Context, userID, keepToken string, cutoff bool, now time.Time) (int, error)
	// ChangePassword replaces the user's password hash (ErrNotFound when
	// it has none). With revoke, in the same transaction it deletes every
	// session of the user but keepToken's and revokes every JWT of the
	// user issued up to now.
	ChangePassword(ctx context.Context, userID, hash, keepToken string, revoke bool, now time.Time) error
	// UpdateUser sets the name and the image (a nil image pointer leaves
	// it, a pointer to nil clears it) and returns the user as it is now.
	UpdateUser(ctx context.Context, userID string, name *string, image **string, now time.Time) (User, error)
	// SetEmail changes the user's address and marks it unverified:
	// ErrEmailTaken when another user has it.
	SetEmail(ctx context.Context, userID, email string, now time.Time) (User, error)
	// DeleteUser deletes the user with its sessions, accounts, roles and
	// tokens, and revokes every JWT of the user issued up to now, in one
	// transaction. ErrNotFound when there is no such user.
	DeleteUser(ctx context.Context, userID string, now time.Time) error
}

// Store errors. Implementations return these (possibly wrapped).
var (
	ErrNotFound   = errors.New("not found")
	ErrEmailTaken = errors.New("email already registered")
)
