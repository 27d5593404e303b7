package proxy

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/authsidecar/authsidecar/revocation"
)

// writeError writes the JSON error body every refusal carries. Messages
// are generic: the log, not the client, learns why.
func writeError(w http.ResponseWriter, status int, code, message string) {
	body := `{"message":` + strconv.Quote(message) + `,"code":` + strconv.Quote(code) + `}`
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write([]byte(body))
}

// unauthorized answers 401 per RFC 6750: a bare challenge when no token
// was sent, error="invalid_token" when one was.
func unauthorized(w http.ResponseWriter, tokenSent bool) {
	challenge := "Bearer"
	if tokenSent {
		challenge = `Bearer error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "Unauthorized")
}

// defaultRetryAfter is sent when no key read is scheduled (the cache was
// closed): a guess, but a client needs some pause.
const defaultRetryAfter = 5 * time.Second

// keysUnavailable answers 503 KEYS_UNAVAILABLE: the token may well be good
// but no key set may judge it now, and a 401 would make the client throw
// it away. Retry-After (RFC 9110 §10.2.3) is the time until the key
// cache's next read, rounded up to whole seconds, at least 1.
func keysUnavailable(w http.ResponseWriter, err error) {
	wait := defaultRetryAfter
	var e *keysUnavailableError
	if errors.As(err, &e) && e.scheduled {
		wait = e.retryIn
	}
	secs := max(1, int64((wait+time.Second-1)/time.Second))
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	writeError(w, http.StatusServiceUnavailable, "KEYS_UNAVAILABLE", "Verification keys unavailable")
}

// revocationsUnavailable answers 503 REVOCATIONS_UNAVAILABLE: the token
// may be good, but whether it was revoked cannot be known now (a
// verifier's feed has failed past keys.revocations_stale_if_error), and
// serving it would fail open. Retry-After is the time until the next
// read of the feed, at least 1s.
func revocationsUnavailable(w http.ResponseWriter, err error) {
	wait := defaultRetryAfter
	var e *revocation.UnavailableError
	if errors.As(err, &e) && e.RetryIn > 0 {
		wait = e.RetryIn
	}
	secs := max(1, int64((wait+time.Second-1)/time.Second))
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	writeError(w, http.StatusServiceUnavailable, "REVOCATIONS_UNAVAILABLE", "Revocations unavailable")
}
