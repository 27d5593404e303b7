package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
)

// cmdUsersResetLink prints a working password-reset link for EMAIL, for an
// operator helping a user; nothing is mailed. It replaces the user's
// older reset links.
func cmdUsersResetLink(ctx context.Context, e *cliEnv, args []string) error {
	email := normEmail(args[0])
	a, err := openAdmin(ctx, e, false)
	if err != nil {
		return err
	}
	defer a.Close()
	link, expires, err := issuer.ResetLink(ctx, a.db, a.cfg.BaseURL, email, a.cfg.Auth.ResetTokenTTL.D(), time.Now())
	if err != nil {
		return notFound(err, email)
	}
	fmt.Fprintln(e.stdout, link)
	fmt.Fprintf(e.stderr, "single use, valid until %s (auth.reset_token_ttl = %s); it replaces %s's older reset links. Hand it to the user over a channel you trust: it sets their password.\n",
		timeText(expires), a.cfg.Auth.ResetTokenTTL, printable(email))
	return nil
}

// cmdOutboxList prints the outbox: every message's delivery state, never
// its content (which is sealed, and gone once delivered or dead).
func cmdOutboxList(ctx context.Context, e *cliEnv, args []string) error {
	state := ""
	if len(args) == 1 {
		state = args[0]
		if state != "pending" && state != "delivered" && state != "dead" {
			return fmt.Errorf("%w: state must be pending, delivered or dead, got %q", errUsage, state)
		}
	}
	a, err := openAdmin(ctx, e, false)
	if err != nil {
		return err
	}
	defer a.Close()
	rows, err := a.db.ListOutbox(ctx, state)
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		fmt.Fprintln(e.stdout, "no messages")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tSTATE\tATTEMPTS\tCREATED\tNEXT ATTEMPT\tLAST ERROR")
	for _, q := range rows {
		next := "-"
		if q.State == "pending" {
			next = timeText(q.NextAttemptAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", q.ID, q.Kind, q.State, q.Attempts, timeText(q.CreatedAt), next, printable(truncateText(q.LastError, 80)))
	}
	return tw.Flush()
}

func truncateText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
