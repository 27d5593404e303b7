package issuer

import (
	"context"
	"errors"
	"time"
)

// Provider is one identity provider users may sign in with: an OpenID
// Connect provider, Google or GitHub (package idp implements them). The
// issuer keeps the flow (state, PKCE verifier, nonce) and the users; the
// provider only talks to the identity provider and applies its own rules
// (email domains, claims, organizations).
type Provider interface {
	// ID is the providerId on the wire and in account rows.
	ID() string
	// AuthCodeURL is where the browser signs in, carrying the flow's
	// state, PKCE challenge (S256 of a.Verifier) and, for OpenID kinds,
	// nonce. It may need the provider's discovery document:
	// ErrProviderUnavailable while that cannot be read.
	AuthCodeURL(ctx context.Context, a AuthRequest) (string, error)
	// UsesNonce reports whether flows carry a nonce (OpenID kinds).
	UsesNonce() bool
	// CheckIssuer is RFC 9207's mix-up defence: the callback's iss
	// parameter, when present, or when the provider says it always sends
	// one, must be the provider's issuer. ErrIssuerMismatch otherwise.
	CheckIssuer(ctx context.Context, iss string, present bool) error
	// Exchange trades the code for tokens and returns whom they identify,
	// with the id token verified (nonce included) and the provider's
	// rules applied. Errors wrap ErrCodeRejected, ErrProviderUnavailable,
	// ErrUserInfo or ErrIdentityRefused.
	Exchange(ctx context.Context, x CodeExchange) (Identity, error)
	// VerifyIDToken checks an id token a client holds (signature against
	// the provider's keys, iss, aud, azp, exp, iat and, when nonce is not
	// empty, nonce) and returns whom it identifies, the provider's rules
	// applied. ErrIDTokenUnsupported for kinds without id tokens.
	VerifyIDToken(ctx context.Context, token, nonce string) (Identity, error)
	// Refresh uses a refresh token. ErrCodeRejected when the provider
	// refuses it.
	Refresh(ctx context.Context, refreshToken string) (ProviderTokens, error)
	// SignUp reports whether a first sign-in may create the user.
	SignUp() bool
	// LinkByEmail reports whether a first sign-in may join an existing
	// user with the same (verified) email.
	LinkByEmail() bool
	// TrustUnverifiedEmail reports whether an identity whose email the
	// provider does not say is verified may sign up (the address stored
	// unclaimed, User.EmailUnclaimed) and be linked explicitly. False:
	// such an identity gets email_not_verified, nothing stored.
	TrustUnverifiedEmail() bool
}

// AuthRequest is what the authorization URL carries.
type AuthRequest struct {
	State, Nonce, Verifier, RedirectURI string
	// Scopes are requested on top of the provider's.
	Scopes []string
	// LoginHint is sent as login_hint when not empty.
	LoginHint string
}

// CodeExchange is what the token request needs.
type CodeExchange struct {
	Code, Verifier, RedirectURI string
	// Nonce is the flow's: the id token must carry it. Empty for kinds
	// without id tokens.
	Nonce string
}

// Identity is a user as a provider vouches for them.
type Identity struct {
	// AccountID is the provider's stable subject (sub; GitHub's numeric id).
	AccountID string
	// Email is lower-cased; empty when the provider gave none.
	Email string
	// EmailVerified is the provider's word that the address is the user's.
	EmailVerified bool
	Name          string
	Image         string
	Tokens        ProviderTokens
}

// ProviderTokens are a token response's tokens, in the clear: the issuer
// seals them before they reach the store.
type ProviderTokens struct {
	AccessToken, RefreshToken, IDToken          string
	AccessTokenExpiresAt, RefreshTokenExpiresAt time.Time // zero: unknown
	Scopes                                      []string
}

// Provider errors. Implementations wrap them with the cause, which the
// log gets; the client gets Better Auth's code for the class.
var (
	// ErrProviderUnavailable: the provider could not be asked (down,
	// slow, a 5xx, a body too large or not what it should be).
	ErrProviderUnavailable = errors.New("identity provider unavailable")
	// ErrCodeRejected: the provider refused the code or refresh token.
	ErrCodeRejected = errors.New("code rejected by the identity provider")
	// ErrUserInfo: the tokens did not say who the user is (an id token
	// that does not verify, userinfo for another subject, no subject).
	ErrUserInfo = errors.New("unable to get user info")
	// ErrIdentityRefused: the user is not admitted by the provider's rules
	// (allowed_email_domains, required_claims, allowed_organizations).
	ErrIdentityRefused = errors.New("identity refused by the provider's rules")
	// ErrIssuerMismatch: RFC 9207's iss is not the provider's issuer.
	ErrIssuerMismatch = errors.New("issuer mismatch")
	// ErrIDTokenUnsupported: the kind has no id tokens (GitHub).
	ErrIDTokenUnsupported = errors.New("id token not supported")
	// ErrInvalidIDToken: a client's id token does not verify.
	ErrInvalidIDToken = errors.New("invalid id token")
)
