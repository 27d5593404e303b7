package mail

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The published Standard Webhooks test vector: a signature any receiver
// library accepts (standard-webhooks reference implementations, Svix).
func TestSignWebhookVector(t *testing.T) {
	key, err := decodeWebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := signWebhook(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func newWebhookSecret(t *testing.T) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(k)
}

// hookReceiver is a webhook endpoint that verifies requests on its own,
// written from the Standard Webhooks spec rather than from the sender.
type hookReceiver struct {
	secret string
	// status, when set, decides the answer to each verified request (n
	// counts from 1); nil means 204.
	status func(n int) int

	mu       sync.Mutex
	verified []hookRequest
	rejected []string // why each refused request was refused
}

type hookRequest struct {
	id, timestamp string
	body          map[string]any
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reason := h.verify(r)
	h.mu.Lock()
	if reason != "" {
		h.rejected = append(h.rejected, reason)
		h.mu.Unlock()
		http.Error(w, `{"error":"`+reason+`"}`, http.StatusUnauthorized)
		return
	}
	n := len(h.verified)
	h.mu.Unlock()
	code := http.StatusNoContent
	if h.status != nil {
		code = h.status(n)
	}
	w.WriteHeader(code)
}

// verify returns "" for a request that passes every check, else why not,
// and records the request.
func (h *hookReceiver) verify(r *http.Request) string {
	if r.Method != http.MethodPost {
		return "method"
	}
	if r.Header.Get("Content-Type") != "application/json" {
		return "content-type"
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return "read"
	}
	id, ts, sigs := r.Header.Get("Webhook-Id"), r.Header.Get("Webhook-Timestamp"), r.Header.Get("Webhook-Signature")
	if id == "" || ts == "" || sigs == "" {
		return "missing header"
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "timestamp"
	}
	if d := time.Since(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return "timestamp tolerance"
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(h.secret, "whsec_"))
	if err != nil {
		return "receiver secret"
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
	want := mac.Sum(nil)
	ok := false
	for _, s := range strings.Fields(sigs) {
		version, b64, found := strings.Cut(s, ",")
		if !found || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			ok = true
		}
	}
	if !ok {
		return "signature"
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return "json"
	}
	h.mu.Lock()
	h.verified = append(h.verified, hookRequest{id: id, timestamp: ts, body: m})
	h.mu.Unlock()
	return ""
}

func (h *hookReceiver) requests() ([]hookRequest, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.verified...), append([]string(nil), h.rejected...)
}

func TestWebhookDelivers(t *testing.T) {
	secret := newWebhookSecret(t)
	h := &hookReceiver{secret: secret}
	srv := httptest.NewServer(h)
	defer srv.Close()
	s, err := NewWebhook(WebhookOptions{URL: srv.URL + "/hooks/mail", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	m := sampleMessage(EmailVerification)
	m.TokenExpiresAt = time.Date(2030, 1, 2, 4, 4, 5, 999, time.FixedZone("CET", 3600))
	id := NewID()
	if err := s.Send(context.Background(), m, id); err != nil {
		t.Fatalf("Send: %v", err)
	}
	got, rejected := h.requests()
	if len(got) != 1 || len(rejected) != 0 {
		t.Fatalf("receiver verified %d, rejected %v; want 1 verified", len(got), rejected)
	}
	if got[0].id != id {
		t.Errorf("webhook-id: got %q, want %q", got[0].id, id)
	}
	want := map[string]any{
		"type":             "email_verification",
		"to":               m.To,
		"url":              m.URL,
		"token_expires_at": "2030-01-02T03:04:05Z",
		"user":             map[string]any{"id": "u_1", "email": "ada@example.com", "name": "Ada"},
	}
	if !reflect.DeepEqual(got[0].body, want) {
		t.Errorf("body:\ngot  %v\nwant %v", got[0].body, want)
	}
}

func TestWebhookWrongSecretRefused(t *testing.T) {
	h := &hookReceiver{secret: newWebhookSecret(t)}
	srv := httptest.NewServer(h)
	defer srv.Close()
	s, err := NewWebhook(WebhookOptions{URL: srv.URL, Secret: newWebhookSecret(t)})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Send(context.Background(), sampleMessage(PasswordReset), NewID())
	if err == nil || !strings.Contains(err.Error(), "status 401") {
		t.Errorf("Send: got %v, want an error with status 401", err)
	}
	got, rejected := h.requests()
	if len(got) != 0 || !reflect.DeepEqual(rejected, []string{"signature"}) {
		t.Errorf("receiver verified %d, rejected %v; want 0 and [signature]", len(got), rejected)
	}
}

// TestWebhookRetriesKeepTheID: every attempt at one message carries the
// same webhook-id, each with its own valid timestamp and signature, and
// only a 2xx counts as delivered.
func TestWebhookRetriesKeepTheID(t *testing.T) {
	secret := newWebhookSecret(t)
	h := &hookReceiver{secret: secret, status: func(n int) int {
		return []int{http.StatusServiceUnavailable, http.StatusBadRequest, http.StatusOK}[n-1]
	}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	clock := time.Now()
	s, err := NewWebhook(WebhookOptions{URL: srv.URL, Secret: secret, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	id := NewID()
	wantErr := []string{"status 503", "status 400", ""}
	for i, w := range wantErr {
		err := s.Send(context.Background(), sampleMessage(PasswordReset), id)
		if (w == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), w)) {
			t.Fatalf("attempt %d: got %v, want %q", i+1, err, w)
		}
		clock = clock.Add(90 * time.Second)
	}
	got, _ := h.requests()
	if len(got) != 3 {
		t.Fatalf("receiver verified %d requests, want 3", len(got))
	}
	for i, r := range got {
		if r.id != id {
			t.Errorf("attempt %d: webhook-id %q, want %q", i+1, r.id, id)
		}
		if i > 0 && r.timestamp == got[i-1].timestamp {
			t.Errorf("attempt %d: timestamp %s repeated; each attempt is signed at its own time", i+1, r.timestamp)
		}
	}
}

func TestWebhookFailures(t *testing.T) {
	secret := newWebhookSecret(t)
	tests := []struct {
		name    string
		handler http.HandlerFunc
		timeout time.Duration
		wantErr string
	}{
		{"server error", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }, 0, "status 500"},
		{"redirect not followed", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/elsewhere" {
				t.Error("the redirect was followed")
			}
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		}, 0, "status 307 (redirects are not followed)"},
		{"timeout", func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body) // so the server notices the client leaving
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}, 200 * time.Millisecond, "deadline exceeded"},
		{"response body echoing the payload is not quoted", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(422)
			io.Copy(w, r.Body)
		}, 0, "status 422"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			s, err := NewWebhook(WebhookOptions{URL: srv.URL + "/hook?key=receiver-credential", Secret: secret, Timeout: tt.timeout})
			if err != nil {
				t.Fatal(err)
			}
			m := sampleMessage(PasswordReset)
			start := time.Now()
			err = s.Send(context.Background(), m, NewID())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Send: got %v, want an error containing %q", err, tt.wantErr)
			}
			for _, secretish := range []string{m.URL, "Tok3n", "receiver-credential"} {
				if strings.Contains(err.Error(), secretish) {
					t.Errorf("error %q contains %q", err, secretish)
				}
			}
			if time.Since(start) > 3*time.Second {
				t.Errorf("Send took %v", time.Since(start))
			}
		})
	}
}

// TestWebhookLargeResponse: a 2xx with a huge body acknowledges without the
// sender reading it all.
func TestWebhookLargeResponse(t *testing.T) {
	secret := newWebhookSecret(t)
	var wrote int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		chunk := make([]byte, 32<<10)
		for i := 0; i < 4096; i++ { // up to 128 MiB
			n, err := w.Write(chunk)
			wrote += int64(n)
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	s, err := NewWebhook(WebhookOptions{URL: srv.URL, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), sampleMessage(PasswordReset), NewID()); err != nil {
		t.Fatalf("Send: %v", err)
	}
	srv.Close() // waits for the handler
	if wrote >= 128<<20 {
		t.Errorf("the server wrote the whole %d-byte body: the sender read it all", wrote)
	}
}

func TestNewWebhookRefuses(t *testing.T) {
	good := newWebhookSecret(t)
	tests := []struct {
		name, url, secret, wantErr string
	}{
		{"no prefix", "https://app.example/hook", strings.TrimPrefix(good, "whsec_"), `"whsec_"`},
		{"other prefix", "https://app.example/hook", "whsk_" + strings.TrimPrefix(good, "whsec_"), `"whsec_"`},
		{"bad base64", "https://app.example/hook", "whsec_not*base64!", "not valid standard base64"},
		{"url-safe base64", "https://app.example/hook", "whsec_" + base64.URLEncoding.EncodeToString(make([]byte, 30)[:]) + "-_", "not valid standard base64"},
		{"short key", "https://app.example/hook", "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 16)), "at least 24"},
		{"empty secret", "https://app.example/hook", "", `"whsec_"`},
		{"relative url", "/hook", good, "absolute http or https"},
		{"ftp url", "ftp://app.example/hook", good, "absolute http or https"},
		{"no host", "https:///hook", good, "absolute http or https"},
		{"empty url", "", good, "absolute http or https"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewWebhook(WebhookOptions{URL: tt.url, Secret: tt.secret})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
			if tt.secret != "" && len(tt.secret) > 8 && strings.Contains(err.Error(), tt.secret[6:]) {
				t.Errorf("error %q quotes the secret", err)
			}
		})
	}
	if _, err := NewWebhook(WebhookOptions{URL: "http://127.0.0.1:9/hook", Secret: good}); err != nil {
		t.Errorf("a good configuration: %v", err)
	}
}

// TestWebhookBodyExact pins the payload byte for byte: field order, the
// expiry in UTC to the second, '&' and '<' unescaped, no trailing newline.
func TestWebhookBodyExact(t *testing.T) {
	m := Message{
		Kind: PasswordReset, To: "ada@example.com",
		URL:            "https://app.example.com/api/auth/reset-password/tok?callbackURL=%2Fa&b=1",
		TokenExpiresAt: time.Date(2030, 1, 2, 4, 4, 5, 123456789, time.FixedZone("CET", 3600)),
		User:           User{ID: "u_1", Email: "ada@example.com", Name: `Ada "<3" Lovelace`},
	}
	got, err := webhookBody(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"password_reset","to":"ada@example.com","url":"https://app.example.com/api/auth/reset-password/tok?callbackURL=%2Fa&b=1","token_expires_at":"2030-01-02T03:04:05Z","user":{"id":"u_1","email":"ada@example.com","name":"Ada \"<3\" Lovelace"}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
