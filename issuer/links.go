package issuer

// Recovery links: a token stored as its hash with its sealed message in
// the outbox, and the URLs that carry it; the CLI makes links here too.

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/mail"
)

// queueLink stores a new token of kind for u and queues the message
// carrying its link, in one transaction. link builds the URL from the
// token. The per-address limit is taken first: over it, nothing is
// queued and nothing is said (the caller answers as if it were).
func (iss *Issuer) queueLink(ctx context.Context, kind mail.Kind, u User, link func(token string) string) error {
	if ok, _, err := iss.mailBudget(ctx, kind, u.Email); err != nil {
		return err
	} else if !ok {
		iss.log.Info("mail not queued: per-address limit reached", "type", string(kind), "user_id", u.ID)
		return nil
	}
	ttl := iss.rec.resetTTL
	if kind == mail.EmailVerification {
		ttl = iss.rec.verifyTTL
	}
	if _, err := QueueLink(ctx, iss.store, iss.rec.seal, kind, u, link, ttl, iss.now()); err != nil {
		return err
	}
	iss.rec.queued(kind)
	return nil
}

// mailBudget takes one mail of kind to email from the per-address limit.
// Each kind has its own budget: verification requests, which anyone may
// make for any address, must not use up the budget of password resets.
func (iss *Issuer) mailBudget(ctx context.Context, kind mail.Kind, email string) (bool, time.Duration, error) {
	return iss.mailAddr.allow(ctx, string(kind)+":"+email)
}

// QueueLink stores a new token of kind for u (replacing the user's older
// ones of that kind) and queues the sealed message carrying its link, in
// one transaction; it returns the message's id. link builds the URL from
// the token. No limit is applied: the issuer takes its own first, and the
// operator's "outbox retry" is one message.
func QueueLink(ctx context.Context, store Store, seal Sealer, kind mail.Kind, u User, link func(token string) string, ttl time.Duration, now time.Time) (string, error) {
	return queueLink(ctx, store, seal, kind, kind, u, link, ttl, now)
}

// queueLink is QueueLink for a token of tokenKind mailed as a message of
// kind to u.Email: a change of address is mailed to the new address as a
// verification of it.
func queueLink(ctx context.Context, store Store, seal Sealer, tokenKind, kind mail.Kind, u User, link func(token string) string, ttl time.Duration, now time.Time) (string, error) {
	tok, hash, err := newLinkToken()
	if err != nil {
		return "", err
	}
	id := mail.NewID()
	now = now.UTC().Truncate(timeUnit)
	t := RecoveryToken{Hash: hash, Kind: tokenKind, UserID: u.ID, Email: u.Email, ExpiresAt: now.Add(ttl), CreatedAt: now}
	sealed, err := seal.Seal(id, mail.Message{
		Kind: kind, To: u.Email, URL: link(tok), TokenExpiresAt: t.ExpiresAt,
		User: mail.User{ID: u.ID, Email: u.Email, Name: u.Name},
	})
	if err != nil {
		return "", fmt.Errorf("seal %s message: %w", kind, err)
	}
	q := mail.Queued{ID: id, Kind: kind, UserID: u.ID, Sealed: sealed, State: mail.StatePending, CreatedAt: now, NextAttemptAt: now}
	if err := store.IssueRecoveryToken(ctx, t, q); err != nil {
		return "", fmt.Errorf("queue %s message: %w", kind, err)
	}
	return id, nil
}

// LinkFor is the link a message of kind carries when nobody chose where
// it lands: the reset page, or "/" after verification.
func LinkFor(baseURL string, kind mail.Kind) (func(token string) string, error) {
	base, err := url.Parse(baseURL)
	if err != nil || base.Host == "" {
		return nil, fmt.Errorf("base URL %q is not an absolute URL", baseURL)
	}
	origin := base.Scheme + "://" + base.Host
	if kind == mail.EmailVerification {
		return func(tok string) string { return verifyURL(origin, "/", tok) }, nil
	}
	return func(tok string) string { return resetURL(origin, "", tok) }, nil
}

// resetLink is the mailed reset URL, Better Auth's shape: callbackURL is
// empty when the client gave no redirectTo (ours then lands on the reset
// page; Better Auth's on an error page).
func (iss *Issuer) resetLink(redirectTo string) func(string) string {
	return func(tok string) string { return resetURL(iss.origin, redirectTo, tok) }
}

func resetURL(origin, redirectTo, tok string) string {
	return origin + BasePath + "/reset-password/" + tok + "?callbackURL=" + url.QueryEscape(redirectTo)
}

// verifyLink is the mailed verification URL.
func (iss *Issuer) verifyLink(callbackURL string) func(string) string {
	if callbackURL == "" {
		callbackURL = "/"
	}
	return func(tok string) string { return verifyURL(iss.origin, callbackURL, tok) }
}

func verifyURL(origin, callbackURL, tok string) string {
	return origin + BasePath + "/verify-email?token=" + tok + "&callbackURL=" + url.QueryEscape(callbackURL)
}

// ResetLink makes a password-reset link for the user with email without
// mailing it, for an operator ("users reset-link"): the link lands on the
// built-in reset page, whatever email.delivery says. It replaces the
// user's older reset links. ErrNotFound when no such user.
func ResetLink(ctx context.Context, store Store, baseURL, email string, ttl time.Duration, now time.Time) (string, time.Time, error) {
	base, err := url.Parse(baseURL)
	if err != nil || base.Host == "" {
		return "", time.Time{}, fmt.Errorf("base URL %q is not an absolute URL", baseURL)
	}
	u, err := claimant(ctx, store, strings.ToLower(email))
	if err != nil {
		return "", time.Time{}, err
	}
	tok, hash, err := newLinkToken()
	if err != nil {
		return "", time.Time{}, err
	}
	now = now.UTC().Truncate(timeUnit)
	t := RecoveryToken{Hash: hash, Kind: mail.PasswordReset, UserID: u.ID, Email: u.Email, ExpiresAt: now.Add(ttl), CreatedAt: now}
	if err := store.IssueRecoveryToken(ctx, t, mail.Queued{}); err != nil {
		return "", time.Time{}, err
	}
	return resetURL(base.Scheme+"://"+base.Host, "", tok), t.ExpiresAt, nil
}

// claimant is the user who claims email (lower case), whether or not it
// has a password: a user who only ever signed in with an identity
// provider, or was imported without a hash, sets one by a reset (the
// reset creates the credential). An unclaimed address has none
// (User.EmailUnclaimed). ErrNotFound when nobody claims it.
func claimant(ctx context.Context, store Store, email string) (User, error) {
	if s, ok := store.(interface {
		UserByEmail(ctx context.Context, email string) (User, error)
	}); ok {
		return s.UserByEmail(ctx, email)
	}
	u, _, err := store.CredentialByEmail(ctx, email)
	return u, err
}
