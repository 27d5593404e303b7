package issuer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Which user a provider identity signs in as, and whether a user or an
// account is created (Better Auth's handleOAuthUserInfo, with its
// pre-registration takeover fix as the only behaviour):
//
//  1. An account (provider, subject) exists: its user, tokens updated.
//  2. Else a provider that does not say the email is verified gets
//     email_not_verified, unless it is trusted with unverified addresses
//     (trust_unverified_email).
//  3. Else a user who claims the email exists: linked only when the
//     provider links by email, says the email is verified, and the local
//     user's email is verified too; else account_not_linked.
//  4. Else a new user, unless the provider's sign_up is false
//     (signup_disabled). An address the provider did not verify is
//     stored unclaimed (User.EmailUnclaimed): it reserves nothing.
//
// Nothing is written until every rule has passed, and then in one
// transaction: a refusal stores nothing.

// socialResult is a resolved sign-in.
type socialResult struct {
	user    User
	session Session
	isNew   bool
}

func refused(code string, cause error) *callbackFail {
	return &callbackFail{code: code, result: socialRefused, cause: cause}
}

func internal(code string, err error) *callbackFail {
	return &callbackFail{code: code, result: socialError, cause: err}
}

// refusedBanned is a banned user's sign-in (Better Auth's admin plugin
// redirects it with error=banned): nothing is written, no session made.
func refusedBanned(u User) *callbackFail {
	return refused("banned", fmt.Errorf("user %s is banned", u.ID))
}

// newAccount is a provider account for userID holding ident's tokens.
func (iss *Issuer) newAccount(p Provider, userID string, ident Identity) (Account, error) {
	id, err := newID()
	if err != nil {
		return Account{}, err
	}
	now := iss.now().UTC().Truncate(timeUnit)
	a := Account{ID: id, AccountID: ident.AccountID, ProviderID: p.ID(), UserID: userID,
		Scope: strings.Join(ident.Tokens.Scopes, ","), CreatedAt: now, UpdatedAt: now}
	return iss.social.withTokens(a, ident.Tokens)
}

func (iss *Issuer) resolveSocial(r *http.Request, p Provider, ident Identity) (socialResult, *callbackFail) {
	ctx := r.Context()
	as := iss.social.accounts
	acct, u, err := as.AccountByProvider(ctx, p.ID(), ident.AccountID)
	switch {
	case err == nil:
		// A returning user: fresh tokens, the scope as first granted.
		if u.Ban.Active(iss.now()) {
			return socialResult{}, refusedBanned(u)
		}
		// An unclaimed address stays so: claiming it would take it from
		// whoever claims it since (docs/identity-providers.md).
		verify := ident.EmailVerified && ident.Email == u.Email && !u.EmailVerified && !u.EmailUnclaimed
		if iss.rec.require && !u.EmailVerified && !verify {
			return socialResult{}, refused("email_not_verified", nil)
		}
		next, err := iss.social.withTokens(acct, ident.Tokens)
		if err != nil {
			return socialResult{}, internal("unable_to_update_account", err)
		}
		next.UpdatedAt = iss.now().UTC().Truncate(timeUnit)
		s, err := iss.newSession(r, u.ID, true)
		if err != nil {
			return socialResult{}, internal("unable_to_create_session", err)
		}
		if err := as.UpdateAccount(ctx, next, s, verify); err != nil {
			return socialResult{}, internal("unable_to_update_account", err)
		}
		if verify {
			u.EmailVerified = true
		}
		return socialResult{user: u, session: s}, nil
	case !errors.Is(err, ErrNotFound):
		return socialResult{}, internal("internal_server_error", err)
	}

	if !ident.EmailVerified && !p.TrustUnverifiedEmail() {
		// Nobody proved the address is this person's: a user made with it
		// would keep its owner out, or be joined to them later.
		return socialResult{}, refused("email_not_verified", errors.New("the provider does not say the email is verified"))
	}
	u, err = as.UserByEmail(ctx, ident.Email)
	switch {
	case err == nil:
		switch {
		case !p.LinkByEmail():
			return socialResult{}, refused("account_not_linked", errors.New("link_by_email is false"))
		case !ident.EmailVerified:
			return socialResult{}, refused("account_not_linked", errors.New("the provider does not say the email is verified"))
		case !u.EmailVerified:
			// Pre-registration takeover: whoever signed up with this
			// address never proved it is theirs.
			return socialResult{}, refused("account_not_linked", errors.New("the local user's email is not verified"))
		case u.Ban.Active(iss.now()):
			return socialResult{}, refusedBanned(u)
		}
		a, err := iss.newAccount(p, u.ID, ident)
		if err != nil {
			return socialResult{}, internal("unable_to_link_account", err)
		}
		s, err := iss.newSession(r, u.ID, true)
		if err != nil {
			return socialResult{}, internal("unable_to_create_session", err)
		}
		if err := as.LinkAccount(ctx, a, s); err != nil {
			return socialResult{}, internal("unable_to_link_account", err)
		}
		return socialResult{user: u, session: s}, nil
	case !errors.Is(err, ErrNotFound):
		return socialResult{}, internal("internal_server_error", err)
	}

	if !p.SignUp() {
		return socialResult{}, refused("signup_disabled", nil)
	}
	if iss.rec.require && !ident.EmailVerified {
		return socialResult{}, refused("email_not_verified", errors.New("require_email_verification, and the provider does not say the email is verified"))
	}
	name := truncate(ident.Name, maxNameBytes)
	if name == "" {
		name, _, _ = strings.Cut(ident.Email, "@")
	}
	hasImage := ident.Image != "" && len(ident.Image) <= 2048
	u, err = iss.newUser(name, ident.Email, hasImage, ident.Image)
	if err != nil {
		return socialResult{}, internal("unable_to_create_user", err)
	}
	u.EmailVerified = ident.EmailVerified
	u.EmailUnclaimed = !ident.EmailVerified
	a, err := iss.newAccount(p, u.ID, ident)
	if err != nil {
		return socialResult{}, internal("unable_to_create_user", err)
	}
	s, err := iss.newSession(r, u.ID, true)
	if err != nil {
		return socialResult{}, internal("unable_to_create_session", err)
	}
	if err := as.CreateSocialUser(ctx, u, a, s); err != nil {
		// ErrEmailTaken or ErrAccountTaken: another request signed the
		// same person up a moment ago.
		return socialResult{}, internal("unable_to_create_user", err)
	}
	return socialResult{user: u, session: s, isNew: true}, nil
}

// linkCallback adds the provider account to the user whose session
// started the link flow (Better Auth's link branch): the session must
// still be live and that user's; see link for the rest. No session is
// created.
func (iss *Issuer) linkCallback(r *http.Request, p Provider, l *flowLink, ident Identity) *callbackFail {
	ctx := r.Context()
	s, u, err := iss.store.SessionByToken(ctx, l.SessionToken)
	switch {
	case errors.Is(err, ErrNotFound) || err == nil && (s.UserID != l.UserID || !iss.now().Before(s.ExpiresAt)):
		return refused("unable_to_link_account", errors.New("the session that began the link has ended"))
	case err != nil:
		return internal("internal_server_error", err)
	}
	return iss.link(ctx, p, u, ident)
}

// link is the rules and the write of an explicit link, for the callback
// and for link-social with an id token: the user's own address must be
// verified (an account linked to an address nobody proved would follow
// the address wherever its holder moves it, to the owner's account
// included); the provider must say its email is verified (unless trusted
// with unverified addresses) and it must be the user's; the identity must
// not be another user's.
func (iss *Issuer) link(ctx context.Context, p Provider, u User, ident Identity) *callbackFail {
	switch {
	case !u.EmailVerified:
		return refused("email_not_verified", errors.New("the user's own email is not verified"))
	case !ident.EmailVerified && !p.TrustUnverifiedEmail():
		return refused("email_not_verified", errors.New("the provider does not say the email is verified"))
	case !strings.EqualFold(ident.Email, u.Email):
		return refused("email_does_not_match", nil)
	}
	as := iss.social.accounts
	acct, owner, err := as.AccountByProvider(ctx, p.ID(), ident.AccountID)
	switch {
	case err == nil && owner.ID != u.ID:
		return refused("account_already_linked_to_different_user", nil)
	case err == nil:
		// Linked already: fresh tokens, the scopes merged.
		next, err := iss.social.withTokens(acct, ident.Tokens)
		if err != nil {
			return internal("unable_to_link_account", err)
		}
		next.Scope = mergeScopes(acct.Scope, ident.Tokens.Scopes)
		next.UpdatedAt = iss.now().UTC().Truncate(timeUnit)
		if err := as.UpdateAccount(ctx, next, Session{}, false); err != nil {
			return internal("unable_to_link_account", err)
		}
		return nil
	case !errors.Is(err, ErrNotFound):
		return internal("internal_server_error", err)
	}
	a, err := iss.newAccount(p, u.ID, ident)
	if err != nil {
		return internal("unable_to_link_account", err)
	}
	switch err := as.LinkAccount(ctx, a, Session{}); {
	case errors.Is(err, ErrAccountTaken):
		return refused("account_already_linked_to_different_user", nil)
	case err != nil:
		return internal("unable_to_link_account", err)
	}
	return nil
}

// mergeScopes adds the new scopes to a stored "a,b" list.
func mergeScopes(stored string, more []string) string {
	var out []string
	if stored != "" {
		out = strings.Split(stored, ",")
	}
	for _, s := range more {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, ",")
}
