// Package mail: only the types sqlstore needs, on branch rec-store, so it
// compiles while the real package is written on rec-mail. The lead keeps
// the real package's file at merge; these declarations are the design's.
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
	TokenExpiresAt time.Time `json:"token_expires_at"` // RFC 3339 on the wire
	User           User      `json:"user"`
}

// Queued is one outbox row as the store hands it to the worker.
type Queued struct {
	ID            string // "msg_" + 26+ random base32/hex chars; also the webhook-id
	Kind          Kind
	Sealed        []byte // nil once delivered or dead
	State         string // "pending" | "delivered" | "dead"
	Attempts      int
	CreatedAt     time.Time
	NextAttemptAt time.Time
	LastError     string
	DeliveredAt   time.Time // zero unless delivered
}

// Queue is what the worker needs from a store (declared in mail, implemented by sqlstore.DB).
type Queue interface {
	// ClaimOutbox leases up to n pending rows whose next_attempt_at <= now and whose lease
	// (if any) has expired, to owner until now+lease; oldest next_attempt_at first. On
	// PostgreSQL: SELECT ... FOR UPDATE SKIP LOCKED inside the UPDATE's transaction.
	ClaimOutbox(ctx context.Context, owner string, n int, lease time.Duration, now time.Time) ([]Queued, error)
	// AckOutbox marks the row delivered and deletes its payload, only while owner holds the
	// lease; ErrLeaseLost otherwise (another replica took it after our lease expired).
	AckOutbox(ctx context.Context, id, owner string, now time.Time) error
	// FailOutbox records a failed attempt (attempts+1, last_error, next_attempt_at = next,
	// lease cleared); dead=true marks the row dead and deletes its payload. ErrLeaseLost as above.
	FailOutbox(ctx context.Context, id, owner string, next time.Time, lastErr string, dead bool, now time.Time) error
	// OldestPending is the created_at of the oldest pending row; ok false when none.
	OldestPending(ctx context.Context) (t time.Time, ok bool, err error)
}

var ErrLeaseLost = errors.New("outbox lease lost")
