package issuer

import (
	"context"
	"errors"
	"time"
)

// OAuthState is one stored sign-in or link flow with an identity
// provider, between sign-in/social and the provider's callback.
type OAuthState struct {
	// Hash is the SHA-256 of the state parameter; the state itself is only
	// in the browser's cookie and the provider's redirect.
	Hash       [32]byte
	ProviderID string
	// Sealed is the flow (PKCE verifier, nonce, callback URLs, link),
	// sealed with a key derived from AUTH_SECRET, bound to Hash.
	Sealed    []byte
	ExpiresAt time.Time
	CreatedAt time.Time
}

// AccountStore is what sign-in with identity providers needs from the
// database besides Store. Every method that writes commits before it
// returns.
type AccountStore interface {
	// SaveOAuthState stores a new flow. Expired flows of every browser
	// are swept now and then afterwards, s.CreatedAt being "now".
	SaveOAuthState(ctx context.Context, s OAuthState) error
	// OAuthState reads a flow without spending it. ErrNotFound if none.
	OAuthState(ctx context.Context, hash [32]byte) (OAuthState, error)
	// TakeOAuthState deletes the flow: it is spent. ErrNotFound when it is
	// gone already (another request took it first).
	TakeOAuthState(ctx context.Context, hash [32]byte) error
	// AccountByProvider returns the account (providerID, accountID) and
	// its user. ErrNotFound if none.
	AccountByProvider(ctx context.Context, providerID, accountID string) (Account, User, error)
	// UserByEmail returns the user with that (lower-case) email.
	// ErrNotFound if none.
	UserByEmail(ctx context.Context, email string) (User, error)
	// CreateSocialUser inserts the user, its provider account and its
	// first session in one transaction. ErrEmailTaken or ErrAccountTaken
	// when another request got there first.
	CreateSocialUser(ctx context.Context, u User, a Account, s Session) error
	// LinkAccount inserts the account a for an existing user and, unless
	// s.Token is empty, the session s, in one transaction.
	// ErrAccountTaken if the provider identity is linked already;
	// ErrNotFound if the user is gone.
	LinkAccount(ctx context.Context, a Account, s Session) error
	// UpdateAccount replaces a's tokens, expiries and scope, marks the
	// user's email verified when verifyEmail, and inserts s unless s.Token
	// is empty, in one transaction. ErrNotFound if the account is gone.
	UpdateAccount(ctx context.Context, a Account, s Session, verifyEmail bool) error
	// Accounts returns the user's accounts, oldest first.
	Accounts(ctx context.Context, userID string) ([]Account, error)
	// DeleteAccount deletes the user's account with that id unless it is
	// the user's last one (ErrLastAccount). ErrNotFound if the user has no
	// such account.
	DeleteAccount(ctx context.Context, userID, id string) error
}

// Store errors of AccountStore.
var (
	ErrAccountTaken = errors.New("provider account already linked")
	ErrLastAccount  = errors.New("the user's last account")
)
