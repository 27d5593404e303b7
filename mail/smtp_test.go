package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/mailtest"
)

// parsed returns the message as the server took it apart, failing the
// test when it does not parse. A multipart/alternative must list the plain
// text first: RFC 2046 5.1.4 orders alternatives by increasing preference.
func parsed(t *testing.T, m mailtest.SMTPMessage) mailtest.Mail {
	t.Helper()
	if m.ParseErr != nil {
		t.Fatalf("received message does not parse: %v\n%s", m.ParseErr, m.Data)
	}
	if m.ContentType == "multipart/alternative" && strings.Join(m.Parts, ",") != "text/plain,text/html" {
		t.Errorf("parts: got %v, want [text/plain text/html]", m.Parts)
	}
	return m.Mail
}

func TestSMTPDelivers(t *testing.T) {
	cert := mailtest.NewCert(t)
	tests := []struct {
		name       string
		mode       mailtest.SMTPMode
		tls        TLSMode
		user, pass string
		wantTLS    bool
	}{
		{"none without auth", mailtest.Plain, TLSNone, "", "", false},
		{"none with auth to loopback", mailtest.Plain, TLSNone, "relay", "pw-none", false},
		{"starttls with auth", mailtest.StartTLS, TLSStartTLS, "sender", "pw-starttls", true},
		{"starttls is the default", mailtest.StartTLS, "", "", "", true},
		{"implicit with auth", mailtest.Implicit, TLSImplicit, "sender", "pw-implicit", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := mailtest.NewSMTPServer(t, mailtest.SMTPOptions{Mode: tt.mode, Cert: cert, Username: tt.user, Password: tt.pass})
			s, err := NewSMTP(SMTPOptions{
				Addr: srv.Addr, TLS: tt.tls, Username: tt.user, Password: tt.pass,
				From:      "Acme Accounts <accounts@acme.example>",
				TLSConfig: &tls.Config{RootCAs: cert.Pool},
				Timeout:   5 * time.Second,
			})
			if err != nil {
				t.Fatalf("NewSMTP: %v", err)
			}
			m := sampleMessage(PasswordReset)
			m.User.Name = `Ada <b>"Lovelace"</b>`
			id := NewID()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// Twice with the same id: a re-send after a crash between
			// delivery and acknowledgement.
			for range 2 {
				if err := s.Send(ctx, m, id); err != nil {
					t.Fatalf("Send: %v", err)
				}
			}
			msgs := srv.Messages()
			if len(msgs) != 2 {
				t.Fatalf("server got %d messages, want 2", len(msgs))
			}
			var ids []string
			for _, r := range msgs {
				if r.EnvelopeFrom != "accounts@acme.example" || r.EnvelopeTo != m.To {
					t.Errorf("envelope: got %s -> %s, want accounts@acme.example -> %s", r.EnvelopeFrom, r.EnvelopeTo, m.To)
				}
				if r.AuthUser != tt.user {
					t.Errorf("authenticated as %q, want %q", r.AuthUser, tt.user)
				}
				if r.TLS != tt.wantTLS {
					t.Errorf("TLS: got %v, want %v", r.TLS, tt.wantTLS)
				}
				p := parsed(t, r)
				if p.ContentType != "multipart/alternative" {
					t.Fatalf("Content-Type: got %s, want multipart/alternative", p.ContentType)
				}
				if p.From.Address != "accounts@acme.example" || p.From.Name != "Acme Accounts" {
					t.Errorf("From: got %v", p.From)
				}
				if p.To.Address != m.To {
					t.Errorf("To: got %v, want %s", p.To, m.To)
				}
				if p.Subject != "Reset your password" {
					t.Errorf("Subject: got %q", p.Subject)
				}
				if got := p.Header.Get("Auto-Submitted"); got != "auto-generated" {
					t.Errorf("Auto-Submitted: got %q", got)
				}
				if _, err := p.Header.Date(); err != nil {
					t.Errorf("Date: %v", err)
				}
				if !strings.Contains(p.Text, m.URL) || !strings.Contains(p.Text, m.User.Name) {
					t.Errorf("text part lacks the URL or the name as given:\n%s", p.Text)
				}
				if !strings.Contains(p.HTML, `href="`+m.URL+`"`) {
					t.Errorf("html part lacks the link:\n%s", p.HTML)
				}
				if strings.Contains(p.HTML, "<b>") || !strings.Contains(p.HTML, "&lt;b&gt;") {
					t.Errorf("html part does not escape the name:\n%s", p.HTML)
				}
				ids = append(ids, p.MessageID)
			}
			if want := "<" + id + "@acme.example>"; ids[0] != want || ids[1] != want {
				t.Errorf("Message-IDs: got %q, want %q on both sends", ids, want)
			}
		})
	}
}

func TestSMTPRefusesToSend(t *testing.T) {
	cert := mailtest.NewCert(t)
	tests := []struct {
		name      string
		server    mailtest.SMTPOptions
		opts      SMTPOptions
		wantErr   string
		wantTries int // AUTH attempts the server saw
	}{
		{
			name:    "wrong password",
			server:  mailtest.SMTPOptions{Mode: mailtest.StartTLS, Username: "sender", Password: "right"},
			opts:    SMTPOptions{TLS: TLSStartTLS, Username: "sender", Password: "wrong"},
			wantErr: "535", wantTries: 1,
		},
		{
			name:    "no credentials where the server requires them",
			server:  mailtest.SMTPOptions{Username: "sender", Password: "right"},
			opts:    SMTPOptions{TLS: TLSNone},
			wantErr: "502",
		},
		{
			// STARTTLS is mandatory: a server (or a man in the middle)
			// not offering it gets neither the password nor the link.
			name:    "starttls not offered",
			server:  mailtest.SMTPOptions{Username: "sender", Password: "right"},
			opts:    SMTPOptions{TLS: TLSStartTLS, Username: "sender", Password: "right"},
			wantErr: "STARTTLS",
		},
		{
			name:    "starttls with an untrusted certificate",
			server:  mailtest.SMTPOptions{Mode: mailtest.StartTLS, Username: "sender", Password: "right"},
			opts:    SMTPOptions{TLS: TLSStartTLS, Username: "sender", Password: "right", TLSConfig: &tls.Config{}},
			wantErr: "certificate",
		},
		{
			name:    "implicit with an untrusted certificate",
			server:  mailtest.SMTPOptions{Mode: mailtest.Implicit},
			opts:    SMTPOptions{TLS: TLSImplicit, TLSConfig: &tls.Config{}},
			wantErr: "certificate",
		},
		{
			name:    "implicit against a plain server",
			opts:    SMTPOptions{TLS: TLSImplicit},
			wantErr: "tls",
		},
		{
			name:    "recipient refused",
			server:  mailtest.SMTPOptions{RejectRcpt: true},
			opts:    SMTPOptions{TLS: TLSNone},
			wantErr: "550",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			so := tt.server
			so.Cert = cert
			srv := mailtest.NewSMTPServer(t, so)
			o := tt.opts
			o.Addr, o.From, o.Timeout = srv.Addr, "accounts@acme.example", 5*time.Second
			if o.TLSConfig == nil {
				o.TLSConfig = &tls.Config{RootCAs: cert.Pool}
			}
			s, err := NewSMTP(o)
			if err != nil {
				t.Fatalf("NewSMTP: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = s.Send(ctx, sampleMessage(EmailVerification), NewID())
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tt.wantErr)) {
				t.Fatalf("Send: got %v, want an error containing %q", err, tt.wantErr)
			}
			if n := len(srv.Messages()); n != 0 {
				t.Errorf("server got %d messages, want 0", n)
			}
			if n := srv.AuthTries(); n != tt.wantTries {
				t.Errorf("AUTH attempts: got %d, want %d", n, tt.wantTries)
			}
		})
	}
}

func TestSMTPCAFile(t *testing.T) {
	srv := mailtest.NewSMTPServer(t, mailtest.SMTPOptions{Mode: mailtest.Implicit})
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, srv.Cert.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := NewSMTP(SMTPOptions{Addr: srv.Addr, TLS: TLSImplicit, From: "a@acme.example", CAFile: ca, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), sampleMessage(PasswordReset), NewID()); err != nil {
		t.Fatalf("Send with the CA file: %v", err)
	}
	if n := len(srv.Messages()); n != 1 {
		t.Fatalf("server got %d messages, want 1", n)
	}
}

// TestSMTPContextEndsSend: a server that stalls in DATA does not hold the
// send past its ctx, even when the per-step timeout is far longer (the
// worker's lease depends on it).
func TestSMTPContextEndsSend(t *testing.T) {
	srv := mailtest.NewSMTPServer(t, mailtest.SMTPOptions{Stall: make(chan struct{})})
	s, err := NewSMTP(SMTPOptions{Addr: srv.Addr, TLS: TLSNone, From: "a@acme.example", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = s.Send(ctx, sampleMessage(PasswordReset), NewID())
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Send: got %v, want context.DeadlineExceeded", err)
	}
	if took > 5*time.Second {
		t.Errorf("Send took %v after a 300ms deadline", took)
	}
}

func TestNewSMTPRefuses(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := SMTPOptions{Addr: "127.0.0.1:25", From: "a@acme.example"}
	tests := []struct {
		name    string
		edit    func(*SMTPOptions)
		wantErr string // "" = accepted
	}{
		{"starttls to a name", func(o *SMTPOptions) { o.Addr = "smtp.acme.example:587" }, ""},
		{"none to 127.0.0.1", func(o *SMTPOptions) { o.TLS = TLSNone }, ""},
		{"none to 127.0.0.53", func(o *SMTPOptions) { o.TLS, o.Addr = TLSNone, "127.0.0.53:25" }, ""},
		{"none to ::1", func(o *SMTPOptions) { o.TLS, o.Addr = TLSNone, "[::1]:25" }, ""},
		{"none to localhost", func(o *SMTPOptions) { o.TLS, o.Addr = TLSNone, "LocalHost:25" }, ""},
		{"none to a name", func(o *SMTPOptions) { o.TLS, o.Addr = TLSNone, "smtp.acme.example:25" }, "only allowed to a loopback address"},
		{"none to a private address", func(o *SMTPOptions) { o.TLS, o.Addr = TLSNone, "10.0.0.1:25" }, "only allowed to a loopback address"},
		{"none to a localhost lookalike", func(o *SMTPOptions) { o.TLS, o.Addr = TLSNone, "localhost.evil.example:25" }, "only allowed to a loopback address"},
		{"none to the unspecified address", func(o *SMTPOptions) { o.TLS, o.Addr = TLSNone, "0.0.0.0:25" }, "only allowed to a loopback address"},
		{"unknown tls mode", func(o *SMTPOptions) { o.TLS = "ssl" }, `tls "ssl"`},
		{"no port", func(o *SMTPOptions) { o.Addr = "127.0.0.1" }, "host:port"},
		{"no host", func(o *SMTPOptions) { o.Addr = ":25" }, "host:port"},
		{"bad port", func(o *SMTPOptions) { o.Addr = "127.0.0.1:0" }, "bad port"},
		{"no from", func(o *SMTPOptions) { o.From = "" }, "from"},
		{"bad from", func(o *SMTPOptions) { o.From = "not an address" }, "from"},
		{"password without username", func(o *SMTPOptions) { o.Password = "pw" }, "without a username"},
		{"missing ca file", func(o *SMTPOptions) { o.CAFile = filepath.Join(dir, "nope.pem") }, "no such file"},
		{"ca file without PEM", func(o *SMTPOptions) { o.CAFile = notPEM }, "no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.edit(&o)
			_, err := NewSMTP(o)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want accepted", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestSMTPRefusesOddIDs(t *testing.T) {
	s, err := NewSMTP(SMTPOptions{Addr: "127.0.0.1:1", TLS: TLSNone, From: "a@acme.example"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "a b", "x>\r\nBcc: v@example.com", "a@b", strings.Repeat("a", 129)} {
		if err := s.Send(context.Background(), sampleMessage(PasswordReset), id); err == nil || !strings.Contains(err.Error(), "Message-ID") {
			t.Errorf("id %q: got %v, want a Message-ID error", id, err)
		}
	}
}
