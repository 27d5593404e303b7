package mailtest

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// The published Standard Webhooks test vector.
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTS     = "1614265330"
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func vectorRequest(edit func(r *http.Request)) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hooks/mail", nil)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Webhook-Id", vectorID)
	r.Header.Set("Webhook-Timestamp", vectorTS)
	r.Header.Set("Webhook-Signature", vectorSig)
	if edit != nil {
		edit(r)
	}
	return r
}

func TestVerifyWebhook(t *testing.T) {
	sec, _ := strconv.ParseInt(vectorTS, 10, 64)
	at := time.Unix(sec, 0)
	tests := []struct {
		name    string
		secret  string
		edit    func(*http.Request)
		body    string
		now     time.Time
		wantErr error // nil: accepted
	}{
		{"the published vector", vectorSecret, nil, vectorBody, at, nil},
		{"one valid signature among others", vectorSecret, func(r *http.Request) {
			r.Header.Set("Webhook-Signature", "v1,bm90IGl0 v2,abc "+vectorSig)
		}, vectorBody, at, nil},
		{"within the tolerance", vectorSecret, nil, vectorBody, at.Add(WebhookTolerance), nil},
		{"too old", vectorSecret, nil, vectorBody, at.Add(WebhookTolerance + time.Second), ErrWebhookTolerance},
		{"from the future", vectorSecret, nil, vectorBody, at.Add(-WebhookTolerance - time.Second), ErrWebhookTolerance},
		{"body changed", vectorSecret, nil, `{"test": 2432232315}`, at, ErrWebhookSignature},
		{"id changed", vectorSecret, func(r *http.Request) { r.Header.Set("Webhook-Id", vectorID+"x") }, vectorBody, at, ErrWebhookSignature},
		{"another secret", "whsec_" + base64.StdEncoding.EncodeToString([]byte("another key of some length")), nil, vectorBody, at, ErrWebhookSignature},
		{"only another version", vectorSecret, func(r *http.Request) {
			r.Header.Set("Webhook-Signature", "v2,"+strings.TrimPrefix(vectorSig, "v1,"))
		}, vectorBody, at, ErrWebhookSignature},
		{"secret without whsec_", strings.TrimPrefix(vectorSecret, "whsec_"), nil, vectorBody, at, ErrWebhookSecret},
		{"no signature", vectorSecret, func(r *http.Request) { r.Header.Del("Webhook-Signature") }, vectorBody, at, ErrWebhookHeaders},
		{"timestamp not a number", vectorSecret, func(r *http.Request) { r.Header.Set("Webhook-Timestamp", "1614265330.5") }, vectorBody, at, ErrWebhookTimestamp},
		{"GET", vectorSecret, func(r *http.Request) { r.Method = http.MethodGet }, vectorBody, at, ErrWebhookMethod},
		{"form content type", vectorSecret, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, vectorBody, at, ErrWebhookContentType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, ts, err := VerifyWebhook(tt.secret, vectorRequest(tt.edit), []byte(tt.body), tt.now)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if err == nil && (id != vectorID || ts != vectorTS) {
				t.Errorf("got id %q ts %q, want %q %q", id, ts, vectorID, vectorTS)
			}
		})
	}
}

// post sends one signed request (the test's own signing, the
// specification's algorithm) with the given webhook-id.
func post(secret, url, id string) (int, error) {
	body := `{"type":"password_reset","to":"ada@example.com","url":"https://app.example/r/tok","token_expires_at":"2030-01-02T03:04:05Z","user":{"id":"u_1","email":"ada@example.com","name":"Ada"}}`
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Webhook-Id", id)
	req.Header.Set("Webhook-Timestamp", ts)
	req.Header.Set("Webhook-Signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	res, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

func TestWebhookReceiver(t *testing.T) {
	secret := NewWebhookSecret(t)
	r := NewWebhookReceiver(t, secret)
	if code, err := post(secret, r.URL, "msg_1"); err != nil || code != 200 {
		t.Fatalf("up: got %d %v, want 200", code, err)
	}
	if code, err := post(NewWebhookSecret(t), r.URL, "msg_forged"); err != nil || code != 401 {
		t.Fatalf("wrong secret: got %d %v, want 401", code, err)
	}

	r.Down()
	if code, err := post(secret, r.URL, "msg_2"); err == nil {
		t.Fatalf("down: got %d, want a refused connection", code)
	}
	r.Up()
	r.SetStatus(func(n int) int { return http.StatusServiceUnavailable })
	if code, err := post(secret, r.URL, "msg_2"); err != nil || code != 503 {
		t.Fatalf("answering 503: got %d %v", code, err)
	}
	r.SetStatus(nil)
	release := r.Hold()
	done := make(chan int)
	go func() {
		code, _ := post(secret, r.URL, "msg_2")
		done <- code
	}()
	select {
	case code := <-done:
		t.Fatalf("held request answered %d before the release", code)
	case <-time.After(100 * time.Millisecond):
	}
	if r.WaitDelivered(2, 50*time.Millisecond) {
		t.Fatal("WaitDelivered(2) returned true with one delivery")
	}
	release()
	if !r.WaitDelivered(2, 5*time.Second) {
		t.Fatal("WaitDelivered(2) returned false after the second delivery")
	}
	if code := <-done; code != 200 {
		t.Fatalf("released: got %d, want 200", code)
	}
	if code, err := post(secret, r.URL, "msg_1"); err != nil || code != 200 {
		t.Fatalf("again: got %d %v", code, err)
	}

	d := r.Deliveries()
	if len(d) != 2 || len(d["msg_1"]) != 2 || len(d["msg_2"]) != 1 {
		t.Errorf("deliveries: got %v, want msg_1 twice and msg_2 once", d)
	}
	if n := r.Delivered(); n != 3 {
		t.Errorf("Delivered: got %d, want 3", n)
	}
	var statuses []int
	for _, h := range r.Requests() {
		statuses = append(statuses, h.Status)
	}
	if fmt.Sprint(statuses) != "[200 503 200 200]" {
		t.Errorf("statuses of verified requests: got %v, want [200 503 200 200]", statuses)
	}
	if got := d["msg_2"][0].Payload; got.Type != "password_reset" || got.User.Name != "Ada" || got.URL != "https://app.example/r/tok" {
		t.Errorf("payload: got %+v", got)
	}
	if rej := r.Rejected(); fmt.Sprint(rej) != "[signature]" {
		t.Errorf("rejected: got %v, want [signature]", rej)
	}
}

// A hand-built multipart/alternative message, as a mail library would
// write it (quoted-printable, CRLF).
const multipartMessage = "From: Acme <accounts@acme.example>\r\n" +
	"To: ada@example.com\r\n" +
	"Subject: =?UTF-8?q?R=C3=A9initialiser?=\r\n" +
	"Message-ID: <msg_1@acme.example>\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/alternative; boundary=b1\r\n" +
	"\r\n" +
	"--b1\r\n" +
	"Content-Type: text/plain; charset=UTF-8\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n" +
	"\r\n" +
	"Open https://app.example/r?a=3D1\r\n" +
	"--b1\r\n" +
	"Content-Type: text/html; charset=UTF-8\r\n" +
	"\r\n" +
	"<a href=\"https://app.example/r?a=1\">reset</a>\r\n" +
	"--b1--\r\n"

func TestSMTPServer(t *testing.T) {
	srv := NewSMTPServer(t, SMTPOptions{Mode: StartTLS, Username: "sender", Password: "pw"})
	send := func(pass string) error {
		c, err := smtp.DialStartTLS(srv.Addr, &tls.Config{RootCAs: srv.Cert.Pool})
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.Auth(sasl.NewPlainClient("", "sender", pass)); err != nil {
			return err
		}
		return c.SendMail("accounts@acme.example", []string{"ada@example.com"}, strings.NewReader(multipartMessage))
	}
	if err := send("wrong"); err == nil || !strings.Contains(err.Error(), "535") {
		t.Fatalf("wrong password: got %v, want 535", err)
	}
	if err := send("pw"); err != nil {
		t.Fatalf("send: %v", err)
	}
	msgs := srv.Messages()
	if len(msgs) != 1 {
		t.Fatalf("got %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.ParseErr != nil {
		t.Fatal(m.ParseErr)
	}
	if !m.TLS || m.AuthUser != "sender" || m.EnvelopeFrom != "accounts@acme.example" || m.EnvelopeTo != "ada@example.com" {
		t.Errorf("session: TLS %v, auth %q, envelope %s -> %s", m.TLS, m.AuthUser, m.EnvelopeFrom, m.EnvelopeTo)
	}
	if m.From.Name != "Acme" || m.To.Address != "ada@example.com" || m.Subject != "Réinitialiser" || m.MessageID != "<msg_1@acme.example>" {
		t.Errorf("headers: from %v, to %v, subject %q, id %q", m.From, m.To, m.Subject, m.MessageID)
	}
	if fmt.Sprint(m.Parts) != "[text/plain text/html]" || m.Text != "Open https://app.example/r?a=1" || m.HTML != `<a href="https://app.example/r?a=1">reset</a>` {
		t.Errorf("parts %v: text %q, html %q", m.Parts, m.Text, m.HTML)
	}
	if n := srv.AuthTries(); n != 2 {
		t.Errorf("AUTH attempts: got %d, want 2", n)
	}
}

func TestParseMailRefuses(t *testing.T) {
	for _, data := range []string{
		"no header at all",
		"From: not an address\r\nTo: a@b.example\r\n\r\nx",
		"From: a@b.example\r\nTo: a@b.example\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nunterminated",
	} {
		if _, err := ParseMail([]byte(data)); err == nil {
			t.Errorf("%q: parsed, want an error", data)
		}
	}
}
