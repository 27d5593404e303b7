package proxy

import (
	"net/http"
	"strconv"
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
