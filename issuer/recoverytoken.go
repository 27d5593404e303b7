package issuer

import (
	"time"

	"github.com/authsidecar/authsidecar/mail"
)

// RecoveryToken is a stored reset or verification token: only its SHA-256 is kept.
type RecoveryToken struct {
	Hash      [32]byte
	Kind      mail.Kind // PasswordReset | EmailVerification
	UserID    string
	Email     string // the address it was sent to; verification fails if the user's email changed
	ExpiresAt time.Time
	CreatedAt time.Time
}
