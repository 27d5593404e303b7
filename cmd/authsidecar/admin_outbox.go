package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/mail"
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
		next, lastErr := "-", q.LastError
		switch q.State {
		case mail.StatePending:
			next = timeText(q.NextAttemptAt)
		case mail.StateDelivered:
			// A retried message's earlier failure is history once it went.
			lastErr = "-"
		}
		if lastErr == "" {
			lastErr = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", q.ID, q.Kind, q.State, q.Attempts, timeText(q.CreatedAt), next, printable(truncateText(lastErr, 80)))
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

// cmdOutboxRetry re-queues message ID. A pending one is made due now. A
// dead one has lost its link with its payload (by design: the database
// keeps no usable link), so a new link of the same kind is made for the
// same user and queued as a new message, replacing the user's older links.
func cmdOutboxRetry(ctx context.Context, e *cliEnv, args []string) error {
	id := args[0]
	a, err := openAdmin(ctx, e, true)
	if err != nil {
		return err
	}
	defer a.Close()
	rows, err := a.db.ListOutbox(ctx, "")
	if err != nil {
		return err
	}
	i := slices.IndexFunc(rows, func(q mail.Queued) bool { return q.ID == id })
	if i < 0 {
		return fmt.Errorf("no message %s in the outbox (authsidecar outbox list shows them)", printable(id))
	}
	q := rows[i]
	switch q.State {
	case mail.StateDelivered:
		return fmt.Errorf("message %s was delivered at %s: nothing to retry", id, timeText(q.DeliveredAt))
	case mail.StatePending:
		if _, err := a.db.RetryOutbox(ctx, id, time.Now()); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "message %s is due now (attempts reset); a running sidecar sends it at its next poll\n", id)
		return nil
	}
	if q.UserID == "" {
		return fmt.Errorf("dead message %s names no user: have the user ask for a new link, or use authsidecar users reset-link", id)
	}
	u, err := a.db.UserByID(ctx, q.UserID)
	if errors.Is(err, issuer.ErrNotFound) {
		return fmt.Errorf("dead message %s: its user %s no longer exists", id, q.UserID)
	}
	if err != nil {
		return err
	}
	box, err := mail.NewBox(a.secret.Bytes())
	if err != nil {
		return err
	}
	link, err := issuer.LinkFor(a.cfg.BaseURL, q.Kind)
	if err != nil {
		return err
	}
	ttl := a.cfg.Auth.ResetTokenTTL.D()
	if q.Kind == mail.EmailVerification {
		ttl = a.cfg.Auth.VerificationTokenTTL.D()
	}
	newID, err := issuer.QueueLink(ctx, a.db, box, q.Kind, u, link, ttl, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "dead message %s lost its link when it died; queued a new %s link for %s as message %s (older links of that kind no longer work)\n",
		id, q.Kind, printable(u.Email), newID)
	return nil
}
