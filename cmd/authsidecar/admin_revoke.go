package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// The operator's revocation levers. Each writes its revocation to the
// database in one transaction; every running full sidecar reads it at its
// next poll (revocation.poll_interval) and every verifier from its
// issuer's feed moments later, so they work against a running fleet.

// banFlags are "users ban"'s own flags.
type banFlags struct {
	reason string
	until  time.Duration
}

// defineBanFlags adds -reason and -until to fs.
func defineBanFlags(fs *flag.FlagSet, e *cliEnv) {
	fs.StringVar(&e.ban.reason, "reason", "", "why, kept with the ban (at most 256 characters)")
	fs.DurationVar(&e.ban.until, "until", 0, "how long the ban lasts, like 72h; 0: until unban")
}

// stamp is now as revocations compare it: to the millisecond.
func stamp() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// cmdUsersRevoke ends every session of the user and revokes every JWT of
// the user issued up to now: sign-out everywhere, by the operator.
func cmdUsersRevoke(ctx context.Context, e *cliEnv, args []string) error {
	email := normEmail(args[0])
	a, err := openAdmin(ctx, e, false)
	if err != nil {
		return err
	}
	defer a.Close()
	u, n, err := a.db.RevokeUserByEmail(ctx, email, stamp())
	if err != nil {
		return notFound(err, email)
	}
	fmt.Fprintf(e.stdout, "revoked every JWT of %s (id %s) issued up to now and ended its %s; running sidecars refuse them within revocation.poll_interval (%s)\n",
		email, u.ID, plural(n, "session"), a.cfg.Revocation.PollInterval)
	return nil
}

// cmdUsersBan bans the user: no sign-in (403 BANNED_USER) until unban or
// -until, every session ended and every JWT revoked.
func cmdUsersBan(ctx context.Context, e *cliEnv, args []string) error {
	email := normEmail(args[0])
	reason := strings.TrimSpace(e.ban.reason)
	switch {
	case utf8.RuneCountInString(reason) > 256 || !utf8.ValidString(reason):
		return fmt.Errorf("%w: -reason: at most 256 characters of UTF-8", errUsage)
	case strings.ContainsAny(reason, "\r\n\x00"):
		return fmt.Errorf("%w: -reason: one line", errUsage)
	case e.ban.until < 0:
		return fmt.Errorf("%w: -until: must not be negative, got %s", errUsage, e.ban.until)
	}
	a, err := openAdmin(ctx, e, false)
	if err != nil {
		return err
	}
	defer a.Close()
	now := stamp()
	var until time.Time
	if e.ban.until > 0 {
		until = now.Add(e.ban.until)
	}
	u, n, err := a.db.BanUserByEmail(ctx, email, reason, until, now)
	if err != nil {
		return notFound(err, email)
	}
	end := "until unban"
	if !until.IsZero() {
		end = "until " + timeText(until)
	}
	fmt.Fprintf(e.stdout, "banned %s (id %s) %s: sign-in answers 403 BANNED_USER; ended its %s and revoked every JWT issued to it, refused everywhere within revocation.poll_interval (%s)\n",
		email, u.ID, end, plural(n, "session"), a.cfg.Revocation.PollInterval)
	return nil
}

// cmdUsersUnban lifts a ban. Nothing revoked comes back: the user signs in
// again.
func cmdUsersUnban(ctx context.Context, e *cliEnv, args []string) error {
	email := normEmail(args[0])
	a, err := openAdmin(ctx, e, false)
	if err != nil {
		return err
	}
	defer a.Close()
	u, was, err := a.db.UnbanUserByEmail(ctx, email, stamp())
	if err != nil {
		return notFound(err, email)
	}
	if !was {
		fmt.Fprintf(e.stdout, "%s (id %s) was not banned\n", email, u.ID)
		return nil
	}
	fmt.Fprintf(e.stdout, "unbanned %s (id %s): it may sign in again; the JWTs revoked with the ban stay revoked\n", email, u.ID)
	return nil
}

// cmdKeysRevokeAll revokes every JWT issued up to now, for everyone:
// what rotating AUTH_SECRET did, without losing the signing keys or the
// cookie sessions, whose next get-session mints a JWT that works.
func cmdKeysRevokeAll(ctx context.Context, e *cliEnv, _ []string) error {
	a, err := openAdmin(ctx, e, false)
	if err != nil {
		return err
	}
	defer a.Close()
	now := stamp()
	if err := a.db.RevokeAll(ctx, now); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("revoke-all: the database did not answer: %w", err)
		}
		return err
	}
	fmt.Fprintf(e.stdout, "revoked every JWT issued up to %s: running sidecars refuse them within revocation.poll_interval (%s); cookie sessions stay, and get-session mints JWTs that work\n",
		now.Format("2006-01-02T15:04:05.000Z"), a.cfg.Revocation.PollInterval)
	return nil
}
