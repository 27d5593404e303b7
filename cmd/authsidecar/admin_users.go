package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/authsidecar/authsidecar/issuer"
)

// cmdUsersList prints every user with its live sessions.
func cmdUsersList(ctx context.Context, e *cliEnv, _ []string) error {
	a, err := openAdmin(ctx, e, false)
	if err != nil {
		return err
	}
	defer a.Close()
	users, err := a.db.Users(ctx, time.Now())
	if err != nil {
		return err
	}
	if len(users) == 0 {
		fmt.Fprintln(e.stdout, "no users")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tEMAIL\tNAME\tCREATED\tSESSIONS")
	for _, u := range users {
		email := printable(u.Email)
		if u.EmailUnclaimed {
			// From a provider that did not verify it: shown, not held.
			email += " (unclaimed)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", u.ID, email, printable(u.Name), timeText(u.CreatedAt), u.LiveSessions)
	}
	return tw.Flush()
}

// cmdUsersDelete deletes a user. Its sessions end at once, and its JWTs
// are revoked in the same transaction: every process refuses them once
// its poller has read the revocation (revocation.poll_interval).
func cmdUsersDelete(ctx context.Context, e *cliEnv, args []string) error {
	email := normEmail(args[0])
	a, err := openAdmin(ctx, e, false)
	if err != nil {
		return err
	}
	defer a.Close()
	d, err := a.db.DeleteUserByEmail(ctx, email, time.Now().UTC().Truncate(time.Millisecond))
	if err != nil {
		return notFound(err, email)
	}
	fmt.Fprintf(e.stdout, "deleted user %s (id %s) with its %s, %s and password\n",
		email, d.User.ID, plural(d.Sessions, "session"), plural(d.Roles, "role"))
	fmt.Fprintf(e.stdout, "every JWT issued to this user is revoked: running sidecars refuse it within revocation.poll_interval (%s)\n",
		a.cfg.Revocation.PollInterval)
	return nil
}

// cmdUsersSetPassword replaces a user's password with the first line of
// stdin, hashed as sign-up hashes. Sessions and JWTs are left alone.
func cmdUsersSetPassword(ctx context.Context, e *cliEnv, args []string) error {
	email := normEmail(args[0])
	a, err := openAdmin(ctx, e, true)
	if err != nil {
		return err
	}
	defer a.Close()
	// Look the user up before reading stdin or paying for a hash.
	u, err := a.db.OperatorUserByEmail(ctx, email)
	if err != nil {
		return notFound(err, email)
	}
	password, err := readPassword(e.stdin, a.cfg.Auth.MaxPasswordLength)
	if err != nil {
		return err
	}
	switch n := utf8.RuneCountInString(password); {
	case n < a.cfg.Auth.MinPasswordLength:
		return fmt.Errorf("password too short: %d characters, auth.min_password_length is %d", n, a.cfg.Auth.MinPasswordLength)
	case n > a.cfg.Auth.MaxPasswordLength:
		return fmt.Errorf("password too long: %d characters, auth.max_password_length is %d", n, a.cfg.Auth.MaxPasswordLength)
	}
	// Zero cost is the issuer's real one: sign-in must verify this hash.
	hash, err := issuer.HashPassword(ctx, password, issuer.ScryptParams{})
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	if err := a.db.SetPassword(ctx, u.ID, hash, time.Now().UTC().Truncate(time.Millisecond)); err != nil {
		if errors.Is(err, issuer.ErrNotFound) {
			return fmt.Errorf("%s (id %s) has no password credential to change", email, u.ID)
		}
		return err
	}
	fmt.Fprintf(e.stdout, "password changed for %s (id %s): sign-in takes the new one now; sessions and issued JWTs are kept\n", email, u.ID)
	return nil
}

// readPassword returns the first line of r without its line ending.
// Reading stops past what maxChars characters could take, so a stray
// binary on stdin is not read whole.
func readPassword(r io.Reader, maxChars int) (string, error) {
	limit := int64(4*maxChars + 2) // UTF-8 is at most 4 bytes a character, then "\r\n"
	line, err := bufio.NewReader(io.LimitReader(r, limit+1)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password from stdin: %w", err)
	}
	if int64(len(line)) > limit {
		return "", fmt.Errorf("password too long: more than auth.max_password_length = %d characters on the first line of stdin", maxChars)
	}
	line = strings.TrimSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", errors.New("no password on stdin: give the new password as the first line")
	}
	if !utf8.ValidString(line) {
		return "", errors.New("password on stdin is not valid UTF-8")
	}
	return line, nil
}
