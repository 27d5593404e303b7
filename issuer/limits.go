package issuer

import (
	"runtime"
	"time"
)

// Limits bound what one client can make the issuer do. The zero value
// of each field is its default.
type Limits struct {
	// BodyBytes caps request bodies. Zero: 64 KiB.
	BodyBytes int64
	// PasswordHashConcurrency bounds simultaneous scrypt computations.
	// Zero: GOMAXPROCS.
	PasswordHashConcurrency int
	// SignInPerIP, SignInPerEmail and SignUpPerIP limit attempts with token
	// buckets (429 with Retry-After beyond). Zero: no limit. The per-email
	// buckets live in the store, shared by every replica on it; the per-IP
	// ones in this process.
	SignInPerIP, SignInPerEmail, SignUpPerIP Rate
	// MailPerIP limits the mail-sending endpoints per client IP (429
	// beyond); MailPerEmail limits mails per address in the store (over
	// it, nothing is queued and the answer does not change); TokenPerIP
	// limits uses of reset and verification links per client IP. Zero: no
	// limit.
	MailPerIP, MailPerEmail, TokenPerIP Rate
	// PasswordCheckPerIP and PasswordCheckPerUser limit checks of a
	// signed-in user's current password (change-password, and every
	// endpoint that hashes one: checkPassword), per client IP in this
	// process and per user in the store; 429 with Retry-After beyond,
	// before any hashing. Zero: no limit.
	PasswordCheckPerIP, PasswordCheckPerUser Rate
	// IPv6Prefix is the prefix length by which every per-IP limit (and
	// the hashing queue's fair share) groups IPv6 clients: one client
	// usually holds a whole /64. IPv4 clients are limited per address.
	// Zero: 64. 128: per address.
	IPv6Prefix int
	// BodyReadTimeout bounds the time to read a request body on
	// /api/auth/*, from the moment the handler starts (408 beyond), so a
	// client trickling a body cannot hold a connection and a handler.
	// Zero: 10 seconds.
	BodyReadTimeout time.Duration
}

// hashSlotCount is PasswordHashConcurrency with its default.
func hashSlotCount(n int) int {
	if n <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return n
}
