package issuer

import (
	"fmt"
	"net/http"
	"time"
)

// ReloadOptions are the Options a running issuer can change: what the
// origin check trusts, the limits, the identity providers and lazy
// migration. The zero values mean what they mean
// in Options.
type ReloadOptions struct {
	TrustedOrigins []string
	Limits
	ClientIP  func(*http.Request) string
	Providers []Provider
	Legacy    LegacySignIn
}

// Reload returns a new Issuer that serves with o's settings and shares
// everything else with iss: the store, the signing keys, cookies,
// metrics and the timing hash (so it costs no scrypt run and no query).
// iss is not changed, so requests it is serving finish with the settings
// they started with. A per-IP limit whose rate (and IPv6Prefix) did not
// change keeps its buckets, shared with iss, so a reload does not let a
// flood start afresh; a changed one starts empty. The per-email and
// per-user ones live in the store and keep their counts. A changed
// PasswordHashConcurrency gives the new issuer its own hashing slots:
// while hashes started on iss finish, both sets may run.
func (iss *Issuer) Reload(o ReloadOptions) (*Issuer, error) {
	next := *iss
	if err := next.apply(o); err != nil {
		return nil, err
	}
	return &next, nil
}

// apply sets what ReloadOptions holds, for New and for Reload alike: the
// limiters (those whose settings changed start empty), the hashing slots
// when their number changed, the trusted origins and the client IP
// function.
func (iss *Issuer) apply(o ReloadOptions) error {
	l := o.Limits
	iss.bodyBytes = l.BodyBytes
	if iss.bodyBytes == 0 {
		iss.bodyBytes = 64 << 10
	}
	iss.bodyTimeout = l.BodyReadTimeout
	if iss.bodyTimeout == 0 {
		iss.bodyTimeout = 10 * time.Second
	}
	iss.v6Bits = l.IPv6Prefix
	if iss.v6Bits == 0 {
		iss.v6Bits = 64
	}
	if iss.v6Bits < 0 || iss.v6Bits > 128 {
		return fmt.Errorf("issuer: IPv6 prefix /%d is not between /1 and /128", l.IPv6Prefix)
	}
	if n := hashSlotCount(l.PasswordHashConcurrency); n != iss.hasher.slots.n {
		prior := iss.hasher
		iss.hasher = newHasher(prior.params, n)
		iss.hasher.nativeTook.Store(prior.nativeTook.Load()) // what foreign hashes are padded to
	}
	iss.clientIP = o.ClientIP
	if iss.clientIP == nil {
		iss.clientIP = peerIP
	}
	iss.signInIP = keepLimiter(iss.signInIP, l.SignInPerIP, iss.v6Bits, iss.now)
	iss.signInMail = newSharedLimiter(iss.store, l.SignInPerEmail, "signin_email:", iss.now)
	iss.signUpIP = keepLimiter(iss.signUpIP, l.SignUpPerIP, iss.v6Bits, iss.now)
	iss.mailIP = keepLimiter(iss.mailIP, l.MailPerIP, iss.v6Bits, iss.now)
	iss.mailAddr = newSharedLimiter(iss.store, l.MailPerEmail, "mail_email:", iss.now)
	iss.tokenIP = keepLimiter(iss.tokenIP, l.TokenPerIP, iss.v6Bits, iss.now)
	iss.pwCheckIP = keepLimiter(iss.pwCheckIP, l.PasswordCheckPerIP, iss.v6Bits, iss.now)
	iss.pwCheckUser = newSharedLimiter(iss.store, l.PasswordCheckPerUser, "password_user:", iss.now)
	iss.trusted = map[string]bool{}
	iss.csrf = http.NewCrossOriginProtection()
	for _, origin := range append([]string{iss.origin}, o.TrustedOrigins...) {
		if err := iss.csrf.AddTrustedOrigin(origin); err != nil {
			return fmt.Errorf("issuer: trusted origin: %w", err)
		}
		iss.trusted[origin] = true
	}
	if err := iss.setProviders(o.Providers); err != nil {
		return err
	}
	if err := iss.setLegacy(o.Legacy); err != nil {
		return err
	}
	iss.routes = iss.routeTable()
	return nil
}
