package mailtest

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Payload is the documented webhook body of package mail.
type Payload struct {
	Type           string `json:"type"`
	To             string `json:"to"`
	URL            string `json:"url"`
	TokenExpiresAt string `json:"token_expires_at"`
	User           struct {
		ID    string `json:"id"`
		Email string `json:"email"`
		Name  string `json:"name"`
	} `json:"user"`
}

// NewWebhookSecret returns a fresh signing secret in its whsec_ form (32
// random bytes).
func NewWebhookSecret(t testing.TB) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(k)
}

// Hook is one request that passed VerifyWebhook.
type Hook struct {
	// ID and Timestamp are its webhook-id and webhook-timestamp.
	ID, Timestamp string
	// Body is the body as sent; Fields is it decoded as a JSON object
	// (every field, for exact comparisons); Payload in the documented
	// shape.
	Body    []byte
	Fields  map[string]any
	Payload Payload
	// At is when it arrived (verified, before any Hold).
	At time.Time
	// Status is what the receiver answered; 0 when the sender left while
	// the request was held.
	Status int
	// Answered: the receiver is done with it, and Status is final (a held
	// request's is 0 until then).
	Answered bool
}

// WebhookReceiver is a webhook endpoint on 127.0.0.1 that verifies each
// request with VerifyWebhook and keeps what passed. It answers a request
// that fails verification 401 with a JSON body, and one that passes with
// the status SetStatus decides (200 by default).
type WebhookReceiver struct {
	// URL is its address, http://127.0.0.1:port/hooks/mail. It does not
	// change across Down and Up.
	URL string

	t      testing.TB
	secret string
	addr   string

	mu       sync.Mutex
	status   func(n int) int
	hold     chan struct{} // nil when not held
	hooks    []Hook
	rejected []string
	// delivered counts hooks answered 2xx; changed is closed and replaced
	// whenever it grows.
	delivered int
	changed   chan struct{}
	srv       *http.Server
	served    chan struct{} // closed when srv's Serve has returned
}

// NewWebhookReceiver starts a receiver for secret (whsec_<base64>), up,
// and stops it when the test ends.
func NewWebhookReceiver(t testing.TB, secret string) *WebhookReceiver {
	t.Helper()
	r := &WebhookReceiver{t: t, secret: secret, changed: make(chan struct{})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = l.Addr().String()
	r.URL = "http://" + r.addr + "/hooks/mail"
	r.serve(l)
	t.Cleanup(r.Down)
	return r
}

func (r *WebhookReceiver) serve(l net.Listener) {
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	r.mu.Lock()
	r.srv, r.served = srv, served
	r.mu.Unlock()
	go func() {
		defer close(served)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.t.Errorf("webhook receiver: %v", err)
		}
	}()
}

// Down stops listening: connections are refused, as when the receiving
// application is not running. Requests in flight are cut off.
func (r *WebhookReceiver) Down() {
	r.mu.Lock()
	srv, served := r.srv, r.served
	r.srv = nil
	r.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Close()
	<-served
}

// Up listens again on the same address (retrying for a few seconds while
// the port is still held by the previous listener's connections).
func (r *WebhookReceiver) Up() {
	r.t.Helper()
	r.mu.Lock()
	up := r.srv != nil
	r.mu.Unlock()
	if up {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := net.Listen("tcp", r.addr)
		if err == nil {
			r.serve(l)
			return
		}
		if !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			r.t.Fatalf("webhook receiver: listen again on %s: %v", r.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SetStatus decides the answer to each verified request from then on; n
// counts verified requests from 1, over the receiver's life. nil means
// 200.
func (r *WebhookReceiver) SetStatus(f func(n int) int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = f
}

// Hold makes verified requests wait, from now until release is called,
// before they are answered (or until their sender gives up).
func (r *WebhookReceiver) Hold() (release func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.hold = ch
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			if r.hold == ch {
				r.hold = nil
			}
			r.mu.Unlock()
			close(ch)
		})
	}
}

// ServeHTTP verifies, records and answers one request.
func (r *WebhookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(req.Body)
	var h Hook
	if err == nil {
		h, err = r.verify(req, body, at)
	}
	if err != nil {
		r.mu.Lock()
		r.rejected = append(r.rejected, err.Error())
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	r.mu.Lock()
	hold, status := r.hold, r.status
	r.hooks = append(r.hooks, h)
	i := len(r.hooks) - 1
	r.mu.Unlock()
	code := http.StatusOK
	if status != nil {
		code = status(i + 1)
	}
	if hold != nil {
		select {
		case <-hold:
		case <-req.Context().Done():
			code = 0
		}
	}
	r.mu.Lock()
	r.hooks[i].Status, r.hooks[i].Answered = code, true
	if code >= 200 && code < 300 {
		r.delivered++
		close(r.changed)
		r.changed = make(chan struct{})
	}
	r.mu.Unlock()
	if code != 0 {
		w.WriteHeader(code)
	}
}

func (r *WebhookReceiver) verify(req *http.Request, body []byte, now time.Time) (Hook, error) {
	id, ts, err := VerifyWebhook(r.secret, req, body, now)
	if err != nil {
		return Hook{}, err
	}
	h := Hook{ID: id, Timestamp: ts, Body: body, At: now}
	if err := json.Unmarshal(body, &h.Fields); err != nil {
		return Hook{}, errors.New("json")
	}
	if err := json.Unmarshal(body, &h.Payload); err != nil {
		return Hook{}, errors.New("json")
	}
	return h, nil
}

// Requests returns every verified request so far, in arrival order,
// whatever it was answered.
func (r *WebhookReceiver) Requests() []Hook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Hook(nil), r.hooks...)
}

// Rejected returns why each refused request was refused (the error texts
// of VerifyWebhook, or "json" for a body that is no JSON object).
func (r *WebhookReceiver) Rejected() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.rejected...)
}

// Deliveries returns the verified requests answered 2xx, by webhook-id:
// a message delivered exactly once has exactly one.
func (r *WebhookReceiver) Deliveries() map[string][]Hook {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]Hook{}
	for _, h := range r.hooks {
		if h.Status >= 200 && h.Status < 300 {
			out[h.ID] = append(out[h.ID], h)
		}
	}
	return out
}

// Delivered counts the verified requests answered 2xx.
func (r *WebhookReceiver) Delivered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.delivered
}

// WaitDelivered waits until Delivered is at least n, or d has passed; it
// reports whether it got there.
func (r *WebhookReceiver) WaitDelivered(n int, d time.Duration) bool {
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		r.mu.Lock()
		got, changed := r.delivered, r.changed
		r.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-changed:
		case <-timeout.C:
			return false
		}
	}
}
