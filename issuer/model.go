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
	Image         *string // nil when unset
	CreatedAt     time.Time
	UpdatedAt     time.Time
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
	// SessionByToken returns the session and its user, ErrNotFound if none.
	SessionByToken(ctx context.Context, token string) (Session, User, error)
	ExtendSession(ctx context.Context, id string, expiresAt, now time.Time) error
	// DeleteSession deletes by token; deleting nothing is not an error.
	DeleteSession(ctx context.Context, token string) error
	// DeleteOtherSessions deletes every session of userID except keepToken.
	DeleteOtherSessions(ctx context.Context, userID, keepToken string) error
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
	// (ErrNotFound when missing or expired), deletes the user's other
	// reset tokens, writes the password hash into the credential account,
	// marks the email verified and, when revokeSessions, deletes every
	// session of the user. It returns the user and the sessions deleted.
	ResetPassword(ctx context.Context, hash [32]byte, passwordHash string, revokeSessions bool, now time.Time) (User, int, error)
	// VerifyEmail, in one transaction, spends the verification token
	// (ErrNotFound when missing, expired, or the user's email is no longer
	// the one it was sent to), marks the email verified and deletes the
	// user's other verification tokens. wasVerified is the state before.
	// When it was false and signIn is not nil, the same transaction
	// inserts *signIn as a session of the token's user (UserID set to
	// them): a failure then leaves the token unspent.
	VerifyEmail(ctx context.Context, hash [32]byte, now time.Time, signIn *Session) (u User, wasVerified bool, err error)
}

// Store errors. Implementations return these (possibly wrapped).
var (
	ErrNotFound   = errors.New("not found")
	ErrEmailTaken = errors.New("email already registered")
)
