package proxy

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/revocation"
)

// Claims is what a verified token tells the proxy: who, and until when.
// Nothing else in a token is trusted (docs/protocol.md).
type Claims struct {
	Subject string
	// Expires is exp. A WebSocket tunnel the token opens is closed at
	// Expires plus the leeway; zero closes it at once.
	Expires time.Time
	// NotBefore is the later of nbf and iat: before it (less the leeway)
	// the token is not yet valid.
	NotBefore time.Time
	KID       string
	// Revocation is what the revocation check reads: the keys of the
	// token's sid and sub, and its issue time to the millisecond (iat_ms,
	// else iat). Computed once, on the full check, and cached with the
	// rest, so a cache hit is checked against revocations at the cost of
	// two lookups.
	Revocation revocation.Token
}

// Revocations says whether a verified token was revoked since it was
// issued (revocation.Set implements it). The proxy consults it on every
// request a token authenticates, cached tokens included, and closes open
// WebSocket tunnels whose token it revokes.
type Revocations interface {
	// Check returns nil, revocation.ErrRevoked, or an error matching
	// revocation.ErrUnavailable when no token can be judged now.
	Check(revocation.Token) error
	// Changed returns a channel closed at the set's next change.
	Changed() <-chan struct{}
}

// Verifier checks a compact JWS JWT and returns its claims. Failures are
// *AuthError with a Reason.
type Verifier interface {
	Verify(ctx context.Context, token string) (Claims, error)
}

// Failure reasons, used in logs and the auth failures metric.
const (
	ReasonMissing       = "missing"
	ReasonMalformed     = "malformed"
	ReasonBadSignature  = "bad_signature"
	ReasonExpired       = "expired"
	ReasonNotYetValid   = "not_yet_valid"
	ReasonUnknownKID    = "unknown_kid"
	ReasonWrongIssuer   = "wrong_issuer"
	ReasonWrongAudience = "wrong_audience"
	ReasonBadClaims     = "bad_claims"
	ReasonNoSession     = "no_session"
	ReasonForbiddenRole = "forbidden_role"
	ReasonBadPath       = "bad_path"
	ReasonBadUpgrade    = "bad_upgrade"
	ReasonBadHost       = "bad_host"
	ReasonUnavailable   = "unavailable"
	// ReasonKeysUnavailable: the key set may not be used (never loaded, or
	// stale past stale_if_error), so no token can be judged.
	ReasonKeysUnavailable = "keys_unavailable"
	// ReasonRevoked: a revocation covers the token (sign-out, a password
	// change or reset, a ban, revoke-all).
	ReasonRevoked = "revoked"
	// ReasonRevocationsUnavailable: the revocation set may not be used
	// (never synced, or its feed failing past
	// keys.revocations_stale_if_error), so no token can be judged.
	ReasonRevocationsUnavailable = "revocations_unavailable"
)

// AuthError is a refused credential. The client sees only the status; the
// log gets Reason and Err.
type AuthError struct {
	Reason string
	Err    error
}

func (e *AuthError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *AuthError) Unwrap() error { return e.Err }

func authErr(reason string, err error) *AuthError { return &AuthError{Reason: reason, Err: err} }

// reasonOf returns the failure reason of err.
func reasonOf(err error) string {
	var ae *AuthError
	if errors.As(err, &ae) {
		return ae.Reason
	}
	return ReasonMalformed
}

// maxTokenLen bounds what reaches the JWT library: our tokens are well
// under 1 KiB, and a parser should never see megabytes of attacker input.
const maxTokenLen = 4096

// bearerToken extracts the token from exactly one Authorization header of
// the form "Bearer <token>" (scheme case-insensitive, one space, one token).
func bearerToken(h http.Header) (string, error) {
	vals := h.Values("Authorization")
	switch len(vals) {
	case 0:
		return "", authErr(ReasonMissing, errors.New("no Authorization header"))
	case 1:
	default:
		return "", authErr(ReasonMalformed, errors.New("more than one Authorization header"))
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", authErr(ReasonMalformed, errors.New("Authorization is not a Bearer credential"))
	}
	// IndexByte is vectorized; ContainsAny scanned the ~500-byte token a
	// byte at a time on every request.
	if token == "" || strings.IndexByte(token, ' ') >= 0 || strings.IndexByte(token, '\t') >= 0 {
		return "", authErr(ReasonMalformed, errors.New("Bearer credential is not exactly one token"))
	}
	return token, nil
}

// validSubject: non-empty, printable ASCII, bounded. It becomes a header
// value upstream, so nothing that could split or confuse a header passes.
func validSubject(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
