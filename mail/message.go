package mail

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"time"
)

// Kind is what a message is for; it is also the webhook "type".
type Kind string

// The kinds of message the issuer sends.
const (
	PasswordReset     Kind = "password_reset"
	EmailVerification Kind = "email_verification"
)

// Kinds lists every Kind, in a fixed order (metrics pre-create a series
// for each; templates need one set each).
func Kinds() []Kind { return []Kind{PasswordReset, EmailVerification} }

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool { return k == PasswordReset || k == EmailVerification }

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
	ID            string // "msg_" + 26 random base32 chars; also the webhook-id
	Kind          Kind
	UserID        string // who it is for (a new link replaces a dead one)
	Sealed        []byte // nil once delivered or dead
	State         string // "pending" | "delivered" | "dead"
	Attempts      int    // claims made (each claim is an attempt), less releases; a claimed row's includes its own
	CreatedAt     time.Time
	NextAttemptAt time.Time
	LastError     string
	DeliveredAt   time.Time // zero unless delivered
}

// Outbox row states.
const (
	StatePending   = "pending"
	StateDelivered = "delivered"
	StateDead      = "dead"
)

// NewID returns a fresh outbox id: "msg_" and 26 lower-case base32
// characters (128 random bits from crypto/rand), so ids never collide
// across replicas and can serve as the Standard Webhooks webhook-id and
// the local part of a Message-ID as they are.
func NewID() string {
	return "msg_" + strings.ToLower(rand.Text())
}

// Queue is what the worker needs from a store (declared here, implemented
// by sqlstore.DB).
type Queue interface {
	// ClaimOutbox leases up to n pending rows whose next_attempt_at <= now and whose lease
	// (if any) has expired, to owner until now+lease, and counts an attempt on each (the
	// claim is the attempt: a try that kills its process still counts); oldest
	// next_attempt_at first. On PostgreSQL: SELECT ... FOR UPDATE SKIP LOCKED inside the
	// UPDATE's transaction.
	ClaimOutbox(ctx context.Context, owner string, n int, lease time.Duration, now time.Time) ([]Queued, error)
	// AckOutbox marks the row delivered and deletes its payload, only while owner holds the
	// lease; ErrLeaseLost otherwise (another replica took it after our lease expired).
	AckOutbox(ctx context.Context, id, owner string, now time.Time) error
	// FailOutbox records the outcome of a failed attempt (last_error, next_attempt_at = next,
	// lease cleared; the claim counted the attempt); dead=true marks the row dead and
	// deletes its payload. ErrLeaseLost as above.
	FailOutbox(ctx context.Context, id, owner string, next time.Time, lastErr string, dead bool, now time.Time) error
	// OldestPending is the created_at of the oldest pending row; ok false when none.
	OldestPending(ctx context.Context) (t time.Time, ok bool, err error)
	// ReleaseOutbox gives back a row owner claimed but did not try to
	// send: the lease cleared, the claim's attempt taken back, due as
	// before. ErrLeaseLost as above.
	ReleaseOutbox(ctx context.Context, id, owner string) error
	// RenewOutbox moves the lease of every pending row owner holds to
	// until and returns how many rows it renewed.
	RenewOutbox(ctx context.Context, owner string, until time.Time) (int, error)
}

// ErrLeaseLost is returned by AckOutbox and FailOutbox when owner no longer
// holds the row's lease.
var ErrLeaseLost = errors.New("outbox lease lost")
