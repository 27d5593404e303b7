package proxy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/internal/strictjson"
)

// Claims is what a verified token tells the proxy: who, and until when.
// Nothing else in a token is trusted (contract §2).
type Claims struct {
	Subject string
	// Expires is exp. A WebSocket tunnel the token opens is closed at
	// Expires plus the leeway; zero closes it at once.
	Expires time.Time
	// NotBefore is the later of nbf and iat: before it (less the leeway)
	// the token is not yet valid.
	NotBefore time.Time
	KID       string
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

// jwsHeader holds the protected header members we look at. Members that
// would let the token choose its own key (jku, jwk, x5u, x5c) or demand
// extensions (crit) are refused outright.
type jwsHeader struct {
	Alg  string          `json:"alg"`
	Kid  string          `json:"kid"`
	Typ  string          `json:"typ"`
	Jku  json.RawMessage `json:"jku"`
	Jwk  json.RawMessage `json:"jwk"`
	X5u  json.RawMessage `json:"x5u"`
	X5c  json.RawMessage `json:"x5c"`
	Crit json.RawMessage `json:"crit"`
	B64  json.RawMessage `json:"b64"`
}

var strictB64 = base64.RawURLEncoding.Strict()

// precheck accepts only compact serialization: at most maxTokenLen bytes
// of base64url in exactly three non-empty parts. It returns the decoded
// protected header. The JWS JSON serialization never gets past this, so a
// library's leniency with it does not matter.
func precheck(token string) (jwsHeader, error) {
	var h jwsHeader
	if len(token) > maxTokenLen {
		return h, authErr(ReasonMalformed, errors.New("token longer than 4 KiB"))
	}
	parts := 0
	for i := 0; i < len(token); i++ {
		c := token[i]
		switch {
		case c == '.':
			parts++
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return h, authErr(ReasonMalformed, errors.New("token is not base64url compact serialization"))
		}
	}
	if parts != 2 {
		return h, authErr(ReasonMalformed, errors.New("token does not have three parts"))
	}
	hdrSeg, rest, _ := strings.Cut(token, ".")
	paySeg, sigSeg, _ := strings.Cut(rest, ".")
	if hdrSeg == "" || paySeg == "" || sigSeg == "" {
		return h, authErr(ReasonMalformed, errors.New("token has an empty part"))
	}
	// Strict decoding refuses non-zero trailing bits, so one signature has
	// exactly one encoding.
	payload, err := strictB64.DecodeString(paySeg)
	if err != nil {
		return h, authErr(ReasonMalformed, errors.New("payload is not canonical base64url"))
	}
	if _, err := strictB64.DecodeString(sigSeg); err != nil {
		return h, authErr(ReasonMalformed, errors.New("signature is not canonical base64url"))
	}
	// jwx would take the last of two "sub" members; another reader of the
	// same token might take the first.
	if err := strictjson.CheckDuplicates(payload); err != nil {
		return h, authErr(ReasonMalformed, fmt.Errorf("payload: %w", err))
	}
	raw, err := strictB64.DecodeString(hdrSeg)
	if err != nil {
		return h, authErr(ReasonMalformed, errors.New("header is not canonical base64url"))
	}
	if err := strictjson.CheckDuplicates(raw); err != nil {
		return h, authErr(ReasonMalformed, fmt.Errorf("header: %w", err))
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return h, authErr(ReasonMalformed, errors.New("header is not a JSON object"))
	}
	switch {
	case h.Alg != "EdDSA":
		return h, authErr(ReasonMalformed, errors.New("header alg is not EdDSA"))
	case h.Kid == "":
		return h, authErr(ReasonMalformed, errors.New("header has no kid"))
	case h.Jku != nil || h.Jwk != nil || h.X5u != nil || h.X5c != nil || h.Crit != nil || h.B64 != nil:
		return h, authErr(ReasonMalformed, errors.New("header carries jku, jwk, x5u, x5c, crit or b64"))
	case h.Typ != "" && h.Typ != "JWT":
		return h, authErr(ReasonMalformed, errors.New("header typ is not JWT"))
	}
	return h, nil
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
