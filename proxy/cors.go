package proxy

import (
	"net/http"
	"strconv"
	"time"
)

// cors answers for /api/*: trusted origins get their Origin echoed (never
// "*", which forbids credentials), with set-auth-jwt exposed so a browser
// script can read the JWT; every other origin gets no CORS headers.
type cors struct {
	origins     map[string]bool
	credentials bool
	maxAge      string
}

func newCORS(origins []string, credentials bool, maxAge time.Duration) *cors {
	c := &cors{origins: map[string]bool{}, credentials: credentials}
	for _, o := range origins {
		c.origins[o] = true
	}
	if maxAge > 0 {
		c.maxAge = strconv.Itoa(int(maxAge / time.Second))
	}
	return c
}

const (
	corsMethods = "GET, POST, PUT, PATCH, DELETE, OPTIONS"
	corsHeaders = "Authorization, Content-Type"
	corsExpose  = "set-auth-jwt"
)

func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
}

// headers decorates an actual (non-preflight) response.
func (c *cors) headers(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h["Vary"] = append(h["Vary"], "Origin") // canonical key already: no rework per request
	origin := r.Header.Get("Origin")
	if origin == "" || !c.origins[origin] {
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	if c.credentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	h.Set("Access-Control-Expose-Headers", corsExpose)
}

// preflight answers OPTIONS with Access-Control-Request-Method without
// authentication (browsers never send credentials on preflights).
func (c *cors) preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Add("Vary", "Origin")
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	origin := r.Header.Get("Origin")
	if !c.origins[origin] {
		writeError(w, http.StatusForbidden, "CORS_ORIGIN_NOT_ALLOWED", "Origin not allowed")
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	if c.credentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	h.Set("Access-Control-Allow-Methods", corsMethods)
	h.Set("Access-Control-Allow-Headers", corsHeaders)
	if c.maxAge != "" {
		h.Set("Access-Control-Max-Age", c.maxAge)
	}
	w.WriteHeader(http.StatusNoContent)
}
