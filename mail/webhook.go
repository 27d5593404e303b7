package mail

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// WebhookOptions configure a webhook sender.
type WebhookOptions struct {
	// URL receives the POSTs; absolute http or https. Required.
	URL string
	// Secret is the signing secret in the Standard Webhooks form
	// "whsec_" + base64(key), the key at least 24 bytes (the spec's
	// lower bound). Required.
	Secret string
	// Timeout bounds one POST, response headers and body included;
	// 0 means 10s. The ctx given to Send bounds it as well.
	Timeout time.Duration
	// Client sends the requests; nil means a client with a clone of
	// http.DefaultTransport. Its CheckRedirect is replaced: redirects are
	// never followed (a 3xx is a failed attempt), so the signed link
	// cannot be bounced to a host the operator did not name.
	Client *http.Client
	// Now is the clock for webhook-timestamp; nil means time.Now.
	Now func() time.Time
}

// WebhookSender POSTs each message as signed JSON, per the Standard
// Webhooks specification (https://www.standardwebhooks.com/): headers
// webhook-id (the outbox id, the same on every retry of one message, so the
// receiver can de-duplicate), webhook-timestamp (unix seconds of this
// attempt) and webhook-signature ("v1," + base64 HMAC-SHA256 of
// "id.timestamp.body" under the secret's key). Safe for concurrent use.
type WebhookSender struct {
	url     string
	key     []byte
	timeout time.Duration
	client  *http.Client
	now     func() time.Time
}

// webhookResponseLimit caps how much of a response body is read: the
// status is the answer, the body only lets the connection be reused.
const webhookResponseLimit = 64 << 10

// NewWebhook checks o and returns a sender. Nothing is sent here.
func NewWebhook(o WebhookOptions) (*WebhookSender, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("webhook: url must be an absolute http or https URL")
	}
	key, err := decodeWebhookSecret(o.Secret)
	if err != nil {
		return nil, err
	}
	w := &WebhookSender{url: o.URL, key: key, timeout: o.Timeout, now: o.Now}
	if w.timeout <= 0 {
		w.timeout = 10 * time.Second
	}
	if w.now == nil {
		w.now = time.Now
	}
	if o.Client != nil {
		c := *o.Client
		w.client = &c
	} else {
		w.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	w.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return w, nil
}

// decodeWebhookSecret returns the key of a "whsec_<base64>" secret. Errors
// never quote the secret.
func decodeWebhookSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return nil, errors.New(`webhook: secret must have the Standard Webhooks form "whsec_" + base64`)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil {
		return nil, errors.New(`webhook: secret: the part after "whsec_" is not valid standard base64`)
	}
	if len(key) < 24 {
		return nil, fmt.Errorf("webhook: secret: key is %d bytes, want at least 24", len(key))
	}
	return key, nil
}

// signWebhook is the Standard Webhooks v1 signature of one request.
func signWebhook(key []byte, id string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write(strconv.AppendInt(nil, ts, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// webhookBody is the JSON a receiver gets: the Message, with its expiry in
// UTC to the second (RFC 3339, e.g. "2030-01-02T03:04:05Z"). '&', '<' and
// '>' are written as themselves, not as \u0026 and the like: the body is
// not embedded in HTML, and a URL with its '&' intact reads better in the
// receiver's logs.
func webhookBody(m Message) ([]byte, error) {
	m.TokenExpiresAt = m.TokenExpiresAt.UTC().Truncate(time.Second)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Send POSTs m; a 2xx answer acknowledges it.
func (w *WebhookSender) Send(ctx context.Context, m Message, id string) error {
	if !validID(id) {
		return fmt.Errorf("webhook: outbox id %q is not usable as webhook-id", id)
	}
	body, err := webhookBody(m)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	ts := w.now().Unix()
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "authsidecar")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", signWebhook(w.key, id, ts, body))
	resp, err := w.client.Do(req)
	if err != nil {
		// *url.Error quotes the URL, which may hold a credential of the
		// receiver's; the cause alone is enough for the log and last_error.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("webhook POST: %w", err)
	}
	// Drain a bounded amount so the connection can be reused; the body
	// is never quoted in errors (a receiver echoing the payload would put
	// the link into last_error and the log).
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, webhookResponseLimit))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			return fmt.Errorf("webhook POST: status %d (redirects are not followed)", resp.StatusCode)
		}
		return fmt.Errorf("webhook POST: status %d", resp.StatusCode)
	}
	return nil
}
