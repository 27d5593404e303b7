// Package mail delivers password-reset and verification mails from the
// outbox: the message content, its sealing at rest, templates, senders
// (SMTP, webhook, log) and the delivery worker.
package mail

import (
	"context"
	"errors"
	"time"
)

// Kind is what a message is for; it is also the webhook "type".
type Kind string

const (
	PasswordReset     Kind = "password_reset"
	EmailVerification Kind = "email_verification"
)

// User is who a message is about (webhook "user").
type User struct {
	ID    string `json:"id"`
	Email string `json:"email"`
	Name  string `json:"name"`
}

// Message is the plaintext of one outbox row: everything a sender needs.
// It holds a usable link, so it only ever exists sealed at rest.
type Message struct {
	Kind           Kind      `json:"type"`
	To             string    `json:"to"`
	URL            string    `json:"url"`
	TokenExpiresAt time.Time `json:"token_expires_at"`
	User           User      `json:"user"`
}

// Queued is one outbox row as the store hands it to the worker.
type Queued struct {
	ID            string // also the webhook-id
	Kind          Kind
	Sealed        []byte // nil once delivered or dead
	State         string // "pending" | "delivered" | "dead"
	Attempts      int
	CreatedAt     time.Time
	NextAttemptAt time.Time
	LastError     string
	DeliveredAt   time.Time // zero unless delivered
}

// Queue is what the worker needs from a store.
type Queue interface {
	ClaimOutbox(ctx context.Context, owner string, n int, lease time.Duration, now time.Time) ([]Queued, error)
	AckOutbox(ctx context.Context, id, owner string, now time.Time) error
	FailOutbox(ctx context.Context, id, owner string, next time.Time, lastErr string, dead bool, now time.Time) error
	OldestPending(ctx context.Context) (t time.Time, ok bool, err error)
}

// ErrLeaseLost means another worker holds the row now.
var ErrLeaseLost = errors.New("outbox lease lost")
