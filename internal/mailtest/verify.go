package mailtest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// WebhookTolerance is how far a webhook-timestamp may be from the
// receiver's clock, either way: the specification's recommended 5 minutes.
const WebhookTolerance = 5 * time.Minute

// Why VerifyWebhook refuses a request; Rejected reports these texts.
var (
	ErrWebhookMethod      = errors.New("method")
	ErrWebhookContentType = errors.New("content-type")
	ErrWebhookHeaders     = errors.New("missing header")
	ErrWebhookTimestamp   = errors.New("timestamp")
	ErrWebhookTolerance   = errors.New("timestamp tolerance")
	ErrWebhookSecret      = errors.New("receiver secret")
	ErrWebhookSignature   = errors.New("signature")
)

// VerifyWebhook checks one request per the Standard Webhooks
// specification: a POST of application/json carrying webhook-id,
// webhook-timestamp (unix seconds within WebhookTolerance of now) and
// webhook-signature, a space-separated list in which some "v1,<base64>"
// is the HMAC-SHA256, keyed with the base64 after "whsec_" in secret, of
// "id.timestamp.body". It returns the id and timestamp of a request that
// passes, else one of the ErrWebhook errors.
func VerifyWebhook(secret string, r *http.Request, body []byte, now time.Time) (id, ts string, err error) {
	if r.Method != http.MethodPost {
		return "", "", ErrWebhookMethod
	}
	if r.Header.Get("Content-Type") != "application/json" {
		return "", "", ErrWebhookContentType
	}
	id, ts, sigs := r.Header.Get("Webhook-Id"), r.Header.Get("Webhook-Timestamp"), r.Header.Get("Webhook-Signature")
	if id == "" || ts == "" || sigs == "" {
		return "", "", ErrWebhookHeaders
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", "", ErrWebhookTimestamp
	}
	if d := now.Sub(time.Unix(sec, 0)); d > WebhookTolerance || d < -WebhookTolerance {
		return "", "", ErrWebhookTolerance
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || !strings.HasPrefix(secret, "whsec_") {
		return "", "", ErrWebhookSecret
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		version, b64, found := strings.Cut(s, ",")
		if !found || version != "v1" {
			continue
		}
		if got, err := base64.StdEncoding.DecodeString(b64); err == nil && hmac.Equal(got, want) {
			return id, ts, nil
		}
	}
	return "", "", ErrWebhookSignature
}
