package mail_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/mail"
)

// verifyWebhook is what a receiver does (docs/recovery.md, "Delivery"): check
// the timestamp is recent, recompute the signature over id.timestamp.body
// with the key (the base64 after "whsec_"), and compare in constant time
// against each "v1,<base64>" in webhook-signature.
func verifyWebhook(secret string, h http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return fmt.Errorf("bad secret: %w", err)
	}
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return fmt.Errorf("timestamp missing or too far from now")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		if v, b64, ok := strings.Cut(sig, ","); ok && v == "v1" {
			if got, err := base64.StdEncoding.DecodeString(b64); err == nil && hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return fmt.Errorf("no valid signature")
}

// ExampleWebhookSender_verify shows a receiver verifying what the webhook
// sender posts, then de-duplicating on webhook-id.
func ExampleWebhookSender_verify() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	seen := map[string]bool{}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err := verifyWebhook(secret, r.Header, body, time.Now()); err != nil {
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		if id := r.Header.Get("webhook-id"); !seen[id] { // a retry of a delivered message repeats its id
			seen[id] = true
			var p struct {
				Type           string    `json:"type"`
				To             string    `json:"to"`
				URL            string    `json:"url"`
				TokenExpiresAt time.Time `json:"token_expires_at"`
				User           struct{ ID, Email, Name string }
			}
			_ = json.Unmarshal(body, &p)
			fmt.Println(p.Type, p.To, p.User.Name, p.URL)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	sender, err := mail.NewWebhook(mail.WebhookOptions{URL: receiver.URL, Secret: secret})
	if err != nil {
		panic(err)
	}
	m := mail.Message{
		Kind: mail.PasswordReset, To: "ada@example.com",
		URL:            "https://app.example.com/api/auth/reset-password/abc?callbackURL=%2F",
		TokenExpiresAt: time.Now().Add(time.Hour),
		User:           mail.User{ID: "u1", Email: "ada@example.com", Name: "Ada"},
	}
	id := mail.NewID()
	fmt.Println(sender.Send(context.Background(), m, id))
	fmt.Println(sender.Send(context.Background(), m, id)) // a re-send: acknowledged, not shown twice

	wrong, _ := mail.NewWebhook(mail.WebhookOptions{URL: receiver.URL, Secret: "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 24))})
	fmt.Println(wrong.Send(context.Background(), m, mail.NewID()))
	// Output:
	// password_reset ada@example.com Ada https://app.example.com/api/auth/reset-password/abc?callbackURL=%2F
	// <nil>
	// <nil>
	// webhook POST: status 401
}
