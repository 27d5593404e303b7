package mail

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	netmail "net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// parsedMail is a received message taken apart with net/mail and
// mime/multipart, independently of the library that built it.
type parsedMail struct {
	header      netmail.Header
	from, to    *netmail.Address
	subject     string
	messageID   string
	contentType string
	text, html  string
}

func parseMail(t *testing.T, data []byte) parsedMail {
	t.Helper()
	msg, err := netmail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("received message does not parse: %v\n%s", err, data)
	}
	var p parsedMail
	p.header = msg.Header
	if p.from, err = netmail.ParseAddress(msg.Header.Get("From")); err != nil {
		t.Fatalf("From %q: %v", msg.Header.Get("From"), err)
	}
	if p.to, err = netmail.ParseAddress(msg.Header.Get("To")); err != nil {
		t.Fatalf("To %q: %v", msg.Header.Get("To"), err)
	}
	if p.subject, err = new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject")); err != nil {
		t.Fatalf("Subject: %v", err)
	}
	p.messageID = msg.Header.Get("Message-Id")
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		t.Fatalf("Content-Type %q: %v", msg.Header.Get("Content-Type"), err)
	}
	p.contentType = mt
	if mt != "multipart/alternative" {
		return p
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	var order []string
	for {
		part, err := mr.NextPart() // decodes quoted-printable
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("multipart: %v", err)
		}
		pt, _, err := mime.ParseMediaType(part.Header.Get("Content-Type"))
		if err != nil {
			t.Fatalf("part Content-Type: %v", err)
		}
		body, err := io.ReadAll(part)
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, pt)
		switch pt {
		case "text/plain":
			p.text = strings.ReplaceAll(string(body), "\r\n", "\n")
		case "text/html":
			p.html = strings.ReplaceAll(string(body), "\r\n", "\n")
		}
	}
	// RFC 2046 5.1.4: alternatives in increasing order of preference,
	// so the plain text comes first.
	if strings.Join(order, ",") != "text/plain,text/html" {
		t.Errorf("parts: got %v, want [text/plain text/html]", order)
	}
	return p
}

func TestSMTPDelivers(t *testing.T) {
	cert := newTestCert(t)
	tests := []struct {
		name       string
		mode       serverMode
		tls        TLSMode
		user, pass string
		wantTLS    bool
	}{
		{"none without auth", plainServer, TLSNone, "", "", false},
		{"none with auth to loopback", plainServer, TLSNone, "relay", "pw-none", false},
		{"starttls with auth", startTLSServer, TLSStartTLS, "sender", "pw-starttls", true},
		{"starttls is the default", startTLSServer, "", "", "", true},
		{"implicit with auth", implicitServer, TLSImplicit, "sender", "pw-implicit", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &smtpServer{user: tt.user, pass: tt.pass}
			srv.start(t, tt.mode, cert)
			s, err := NewSMTP(SMTPOptions{
				Addr: srv.addr, TLS: tt.tls, Username: tt.user, Password: tt.pass,
				From:      "Acme Accounts <accounts@acme.example>",
				TLSConfig: &tls.Config{RootCAs: cert.pool},
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
			msgs := srv.messages()
			if len(msgs) != 2 {
				t.Fatalf("server got %d messages, want 2", len(msgs))
			}
			var ids []string
			for _, r := range msgs {
				if r.from != "accounts@acme.example" || r.to != m.To {
					t.Errorf("envelope: got %s -> %s, want accounts@acme.example -> %s", r.from, r.to, m.To)
				}
				if r.authUser != tt.user {
					t.Errorf("authenticated as %q, want %q", r.authUser, tt.user)
				}
				if r.tls != tt.wantTLS {
					t.Errorf("TLS: got %v, want %v", r.tls, tt.wantTLS)
				}
				p := parseMail(t, r.data)
				if p.contentType != "multipart/alternative" {
					t.Fatalf("Content-Type: got %s, want multipart/alternative", p.contentType)
				}
				if p.from.Address != "accounts@acme.example" || p.from.Name != "Acme Accounts" {
					t.Errorf("From: got %v", p.from)
				}
				if p.to.Address != m.To {
					t.Errorf("To: got %v, want %s", p.to, m.To)
				}
				if p.subject != "Reset your password" {
					t.Errorf("Subject: got %q", p.subject)
				}
				if got := p.header.Get("Auto-Submitted"); got != "auto-generated" {
					t.Errorf("Auto-Submitted: got %q", got)
				}
				if _, err := p.header.Date(); err != nil {
					t.Errorf("Date: %v", err)
				}
				if !strings.Contains(p.text, m.URL) || !strings.Contains(p.text, m.User.Name) {
					t.Errorf("text part lacks the URL or the name as given:\n%s", p.text)
				}
				if !strings.Contains(p.html, `href="`+m.URL+`"`) {
					t.Errorf("html part lacks the link:\n%s", p.html)
				}
				if strings.Contains(p.html, "<b>") || !strings.Contains(p.html, "&lt;b&gt;") {
					t.Errorf("html part does not escape the name:\n%s", p.html)
				}
				ids = append(ids, p.messageID)
			}
			if want := "<" + id + "@acme.example>"; ids[0] != want || ids[1] != want {
				t.Errorf("Message-IDs: got %q, want %q on both sends", ids, want)
			}
		})
	}
}

// serverConf is the settable part of an smtpServer (which holds a mutex,
// so a table does not copy it).
type serverConf struct {
	user, pass string
	rejectRcpt bool
}

func TestSMTPRefusesToSend(t *testing.T) {
	cert := newTestCert(t)
	tests := []struct {
		name      string
		mode      serverMode
		server    serverConf
		opts      SMTPOptions
		wantErr   string
		wantTries int // AUTH attempts the server saw
	}{
		{
			name: "wrong password", mode: startTLSServer,
			server:  serverConf{user: "sender", pass: "right"},
			opts:    SMTPOptions{TLS: TLSStartTLS, Username: "sender", Password: "wrong"},
			wantErr: "535", wantTries: 1,
		},
		{
			name: "no credentials where the server requires them", mode: plainServer,
			server:  serverConf{user: "sender", pass: "right"},
			opts:    SMTPOptions{TLS: TLSNone},
			wantErr: "502",
		},
		{
			// STARTTLS is mandatory: a server (or a man in the middle)
			// not offering it gets neither the password nor the link.
			name: "starttls not offered", mode: plainServer,
			server:  serverConf{user: "sender", pass: "right"},
			opts:    SMTPOptions{TLS: TLSStartTLS, Username: "sender", Password: "right"},
			wantErr: "STARTTLS",
		},
		{
			name: "starttls with an untrusted certificate", mode: startTLSServer,
			server:  serverConf{user: "sender", pass: "right"},
			opts:    SMTPOptions{TLS: TLSStartTLS, Username: "sender", Password: "right", TLSConfig: &tls.Config{}},
			wantErr: "certificate",
		},
		{
			name: "implicit with an untrusted certificate", mode: implicitServer,
			opts:    SMTPOptions{TLS: TLSImplicit, TLSConfig: &tls.Config{}},
			wantErr: "certificate",
		},
		{
			name: "implicit against a plain server", mode: plainServer,
			opts:    SMTPOptions{TLS: TLSImplicit},
			wantErr: "tls",
		},
		{
			name: "recipient refused", mode: plainServer,
			server:  serverConf{rejectRcpt: true},
			opts:    SMTPOptions{TLS: TLSNone},
			wantErr: "550",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &smtpServer{user: tt.server.user, pass: tt.server.pass, rejectRcpt: tt.server.rejectRcpt}
			srv.start(t, tt.mode, cert)
			o := tt.opts
			o.Addr, o.From, o.Timeout = srv.addr, "accounts@acme.example", 5*time.Second
			if o.TLSConfig == nil {
				o.TLSConfig = &tls.Config{RootCAs: cert.pool}
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
			if n := len(srv.messages()); n != 0 {
				t.Errorf("server got %d messages, want 0", n)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if srv.authTries != tt.wantTries {
				t.Errorf("AUTH attempts: got %d, want %d", srv.authTries, tt.wantTries)
			}
		})
	}
}

func TestSMTPCAFile(t *testing.T) {
	cert := newTestCert(t)
	srv := &smtpServer{}
	srv.start(t, implicitServer, cert)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, cert.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := NewSMTP(SMTPOptions{Addr: srv.addr, TLS: TLSImplicit, From: "a@acme.example", CAFile: ca, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), sampleMessage(PasswordReset), NewID()); err != nil {
		t.Fatalf("Send with the CA file: %v", err)
	}
	if n := len(srv.messages()); n != 1 {
		t.Fatalf("server got %d messages, want 1", n)
	}
}

// TestSMTPContextEndsSend: a server that stalls in DATA does not hold the
// send past its ctx, even when the per-step timeout is far longer (the
// worker's lease depends on it).
func TestSMTPContextEndsSend(t *testing.T) {
	srv := &smtpServer{stall: make(chan struct{})}
	srv.start(t, plainServer, testCert{})
	s, err := NewSMTP(SMTPOptions{Addr: srv.addr, TLS: TLSNone, From: "a@acme.example", Timeout: time.Minute})
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
