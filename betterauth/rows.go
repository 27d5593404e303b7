package betterauth

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/passhash"
	"github.com/authsidecar/authsidecar/userimport"
)

// credential is Better Auth's provider id of the password's account, as
// it is the sidecar's.
const credential = "credential"

// maxUserAgent is what the sidecar keeps of a session's User-Agent.
const maxUserAgent = 512

// user reads a user row: kept, or refused (the import then stops).
func (rd *reader) user(r row, snap *issuer.Snapshot) error {
	var u issuer.User
	var err error
	vals := []struct {
		col string
		dst *string
	}{{"id", &u.ID}, {"name", &u.Name}, {"email", &u.Email}, {"banReason", &u.Ban.Reason}}
	for _, v := range vals {
		if *v.dst, err = text(r.get(v.col)); err != nil {
			return fmt.Errorf("user %s: %s: %w", u.ID, v.col, err)
		}
	}
	refuse := func(format string, args ...any) error {
		rd.refused = append(rd.refused, fmt.Sprintf("user %s: ", strconv.Quote(u.ID))+fmt.Sprintf(format, args...))
		return nil
	}
	if !issuer.ValidUserID(u.ID) {
		return refuse("the id is not one the sidecar takes: want %s", issuer.UserIDRule)
	}
	email := strings.ToLower(u.Email)
	if !issuer.ValidEmail(email) {
		return refuse("email %s is not an address sign-up accepts", strconv.Quote(u.Email))
	}
	if other, dup := rd.emails[email]; dup {
		return refuse("email %s is also user %s's, case aside", strconv.Quote(u.Email), strconv.Quote(other))
	}
	u.Email = email
	if u.EmailVerified, err = boolean(r.get("emailVerified")); err != nil {
		return fmt.Errorf("user %s: emailVerified: %w", u.ID, err)
	}
	if u.CreatedAt, err = instant(r.get("createdAt")); err != nil {
		return fmt.Errorf("user %s: createdAt: %w", u.ID, err)
	}
	if u.UpdatedAt, err = instant(r.get("updatedAt")); err != nil {
		return fmt.Errorf("user %s: updatedAt: %w", u.ID, err)
	}
	if !utf8.ValidString(u.Name) || len(u.Name) > issuer.MaxNameBytes {
		u.Name = clip(strings.ToValidUTF8(u.Name, "\uFFFD"), issuer.MaxNameBytes)
		rd.rep.note(1, fmt.Sprintf("names longer than %d bytes, or not UTF-8: clipped", issuer.MaxNameBytes))
	}
	if image, err := text(r.get("image")); err != nil {
		return fmt.Errorf("user %s: image: %w", u.ID, err)
	} else if image != "" {
		if len(image) > userimport.MaxImageBytes || !utf8.ValidString(image) || strings.HasPrefix(strings.ToLower(image), "data:") {
			rd.rep.note(1, fmt.Sprintf("images that are no URL of at most %d bytes (a data: URL): left out, the users keep no image", userimport.MaxImageBytes))
		} else {
			u.Image = &image
		}
	}
	if u.Ban.Banned, err = boolean(r.get("banned")); err != nil {
		return fmt.Errorf("user %s: banned: %w", u.ID, err)
	}
	if u.Ban.Expires, err = instant(r.get("banExpires")); err != nil {
		return fmt.Errorf("user %s: banExpires: %w", u.ID, err)
	}
	if !u.Ban.Banned {
		u.Ban = issuer.Ban{}
	} else {
		rd.rep.Bans++
	}
	role, err := text(r.get("role"))
	if err != nil {
		return fmt.Errorf("user %s: role: %w", u.ID, err)
	}
	// The admin plugin's roles: one column, comma-separated.
	var roles []string
	for _, name := range strings.Split(role, ",") {
		switch name = strings.TrimSpace(name); {
		case name == "" || slices.Contains(roles, name):
		case !issuer.ValidRole(name):
			rd.rep.note(1, fmt.Sprintf("role %s: not a role name the sidecar takes ([a-z0-9_-]+): not granted", strconv.Quote(name)))
		default:
			roles = append(roles, name)
			snap.Roles = append(snap.Roles, issuer.RoleGrant{UserID: u.ID, Email: u.Email, Role: name, CreatedAt: rd.now})
		}
	}
	rd.rep.Roles += len(roles)
	rd.users[u.ID], rd.emails[email] = u, u.ID
	snap.Users = append(snap.Users, u)
	rd.rep.Users++
	return nil
}

// account reads an account row: a password, a provider's link, or
// something left behind.
func (rd *reader) account(r row, snap *issuer.Snapshot) error {
	var a issuer.Account
	var err error
	var password string
	var tokens issuer.ProviderTokens
	vals := []struct {
		col string
		dst *string
	}{
		{"id", &a.ID}, {"accountId", &a.AccountID}, {"providerId", &a.ProviderID}, {"userId", &a.UserID}, {"scope", &a.Scope},
		{"password", &password}, {"accessToken", &tokens.AccessToken}, {"refreshToken", &tokens.RefreshToken}, {"idToken", &tokens.IDToken},
	}
	for _, v := range vals {
		if *v.dst, err = text(r.get(v.col)); err != nil {
			return fmt.Errorf("account %s: %s: %w", a.ID, v.col, err)
		}
	}
	times := []struct {
		col string
		dst *time.Time
	}{
		{"createdAt", &a.CreatedAt}, {"updatedAt", &a.UpdatedAt},
		{"accessTokenExpiresAt", &tokens.AccessTokenExpiresAt}, {"refreshTokenExpiresAt", &tokens.RefreshTokenExpiresAt},
	}
	for _, v := range times {
		if *v.dst, err = instant(r.get(v.col)); err != nil {
			return fmt.Errorf("account %s: %s: %w", a.ID, v.col, err)
		}
	}
	u, ok := rd.users[a.UserID]
	switch {
	case !ok:
		rd.rep.note(1, "accounts of no user (a dangling userId): not carried")
		return nil
	case a.ProviderID == credential:
		return rd.credential(a, u, password, snap)
	case !slices.Contains(rd.o.Providers, a.ProviderID):
		rd.rep.note(1, fmt.Sprintf("accounts of provider %s: no identity provider %s is configured here, so they are not linked (configure it, the same provider behind it, before importing; or its users join by address when they sign in with it, as identity-providers.md says)", a.ProviderID, a.ProviderID))
		return nil
	case a.AccountID == "" || rd.accounts[[2]string{a.ProviderID, a.AccountID}]:
		rd.rep.note(1, fmt.Sprintf("accounts of provider %s with no accountId, or one an earlier account has: not carried", a.ProviderID))
		return nil
	}
	for _, tok := range []*string{&tokens.AccessToken, &tokens.RefreshToken, &tokens.IDToken} {
		if *tok, err = issuer.OpenBetterAuthToken(rd.o.BetterAuthSecret, *tok); err != nil {
			rd.rep.note(1, "provider tokens encrypted with a versioned secret ($ba$): left out, the accounts stay linked")
			*tok = ""
		}
	}
	if a.Scope != "" {
		tokens.Scopes = strings.Split(a.Scope, ",")
	}
	if a, err = issuer.SealAccountTokens(rd.o.AuthSecret, a, tokens); err != nil {
		return fmt.Errorf("account %s: %w", a.ID, err)
	}
	rd.accounts[[2]string{a.ProviderID, a.AccountID}] = true
	snap.Accounts = append(snap.Accounts, a)
	rd.rep.ProviderAccounts++
	return nil
}

// credential keeps a password's account with its hash as stored: Better
// Auth's scrypt is the sidecar's own format, and any other format the
// sidecar reads (a custom password.hash writing bcrypt, say) is verified
// at sign-in and upgraded.
func (rd *reader) credential(a issuer.Account, u issuer.User, password string, snap *issuer.Snapshot) error {
	if password == "" {
		rd.rep.note(1, "credential accounts without a password: not carried")
		return nil
	}
	if _, err := passhash.Parse(password, passhash.Options{}); err != nil {
		reason := err.Error()
		if errors.Is(err, passhash.ErrWeak) {
			reason = "a weak digest"
		}
		rd.rep.note(1, fmt.Sprintf("passwords the sidecar cannot verify (%s): not carried, the users set one by 'Forgot password?'", reason))
		return nil
	}
	if rd.accounts[[2]string{credential, u.ID}] {
		rd.rep.note(1, "second credential accounts of a user: not carried")
		return nil
	}
	a.AccountID, a.Password = u.ID, &password
	rd.accounts[[2]string{credential, u.ID}] = true
	snap.Accounts = append(snap.Accounts, a)
	rd.rep.Passwords++
	return nil
}

// session reads a session row: a live one keeps its token, so Better
// Auth's cookie still names it.
func (rd *reader) session(r row, snap *issuer.Snapshot) error {
	var s issuer.Session
	var impersonatedBy string
	var err error
	vals := []struct {
		col string
		dst *string
	}{{"id", &s.ID}, {"token", &s.Token}, {"userId", &s.UserID}, {"ipAddress", &s.IPAddress}, {"userAgent", &s.UserAgent}, {"impersonatedBy", &impersonatedBy}}
	for _, v := range vals {
		if *v.dst, err = text(r.get(v.col)); err != nil {
			return fmt.Errorf("session %s: %s: %w", s.ID, v.col, err)
		}
	}
	for _, v := range []struct {
		col string
		dst *time.Time
	}{{"expiresAt", &s.ExpiresAt}, {"createdAt", &s.CreatedAt}, {"updatedAt", &s.UpdatedAt}} {
		if *v.dst, err = instant(r.get(v.col)); err != nil {
			return fmt.Errorf("session %s: %s: %w", s.ID, v.col, err)
		}
	}
	switch _, ok := rd.users[s.UserID]; {
	case !ok:
		rd.rep.note(1, "sessions of no user (a dangling userId): not carried")
		return nil
	case !s.ExpiresAt.After(rd.now):
		rd.rep.ExpiredSessions++
		return nil
	case impersonatedBy != "":
		// An admin acting as the user: the sidecar has no impersonation,
		// and a session that is a user's without being theirs is not
		// carried.
		rd.rep.note(1, "sessions an admin opened as another user (the admin plugin's impersonation): not carried")
		return nil
	case s.Token == "":
		rd.rep.note(1, "sessions without a token: not carried")
		return nil
	}
	if s.CreatedAt.IsZero() || s.CreatedAt.After(s.ExpiresAt) {
		s.CreatedAt = rd.now
	}
	if s.UpdatedAt.IsZero() || s.UpdatedAt.After(s.ExpiresAt) {
		s.UpdatedAt = s.CreatedAt
	}
	// Better Auth keeps no rememberMe: such a session is extended, as
	// Better Auth extends every session whose cookie it is sent.
	s.Remember = true
	s.UserAgent = clip(s.UserAgent, maxUserAgent)
	snap.Sessions = append(snap.Sessions, s)
	rd.rep.Sessions++
	return nil
}

// key reads a row of the jwt() plugin's jwks: its private key opened with
// BETTER_AUTH_SECRET and sealed with AUTH_SECRET, so the JWTs it signed
// keep verifying (and it may go on signing). A key that does not open
// with the secret given stops the import: the secret is not the one
// Better Auth ran with, and its cookies would not verify either.
func (rd *reader) key(r row, snap *issuer.Snapshot) error {
	var k issuer.KeyRecord
	var err error
	for _, v := range []struct {
		col string
		dst *string
	}{{"id", &k.ID}, {"publicKey", &k.PublicKey}, {"privateKey", &k.PrivateKey}, {"alg", &k.Alg}, {"crv", &k.Crv}} {
		if *v.dst, err = text(r.get(v.col)); err != nil {
			return fmt.Errorf("key %s: %s: %w", k.ID, v.col, err)
		}
	}
	if k.CreatedAt, err = instant(r.get("createdAt")); err != nil {
		return fmt.Errorf("key %s: createdAt: %w", k.ID, err)
	}
	if k.ExpiresAt, err = instant(r.get("expiresAt")); err != nil {
		return fmt.Errorf("key %s: expiresAt: %w", k.ID, err)
	}
	k, err = issuer.ReencryptKey(k, rd.o.BetterAuthSecret, rd.o.AuthSecret)
	switch {
	case errors.Is(err, issuer.ErrBetterAuthSecret):
		return fmt.Errorf("jwks: %w", err)
	case err != nil:
		rd.rep.note(1, fmt.Sprintf("signing keys the sidecar cannot use (%s): not carried, the JWTs they signed fail and their clients fetch new ones with the session cookie", err))
		return nil
	}
	snap.Keys = append(snap.Keys, k)
	rd.rep.Keys++
	return nil
}

// clip cuts s to at most n bytes, on a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
