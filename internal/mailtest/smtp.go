package mailtest

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// SMTPMode is how the server speaks TLS.
type SMTPMode int

const (
	// Plain speaks no TLS at all (it still offers AUTH, so a client that
	// would send a password in clear is caught by the client's own rule,
	// not by the server's politeness).
	Plain SMTPMode = iota
	// StartTLS offers STARTTLS.
	StartTLS
	// Implicit is TLS from the first byte (port 465 style).
	Implicit
)

// SMTPOptions configure an SMTPServer. The zero value is a plain server
// that accepts every message without authentication.
type SMTPOptions struct {
	// Mode is the TLS mode; zero is Plain.
	Mode SMTPMode
	// Cert is the server certificate for StartTLS and Implicit. Zero: a
	// fresh NewCert (see SMTPServer.Cert).
	Cert Cert
	// Username and Password, when Username is set, are the only accepted
	// AUTH PLAIN credentials, and MAIL is refused before authentication.
	// Zero: no AUTH offered, none required.
	Username, Password string
	// Stall, when not nil, makes DATA wait until it is closed and then
	// answer 451; the server closes it when the test ends if nobody did.
	Stall chan struct{}
	// RejectRcpt answers every RCPT with 550. Zero: recipients accepted.
	RejectRcpt bool
	// OnData, when not nil, is called after each message is kept.
	OnData func()
}

// SMTPMessage is one message as the server took it.
type SMTPMessage struct {
	// EnvelopeFrom and EnvelopeTo are MAIL FROM and RCPT TO.
	EnvelopeFrom, EnvelopeTo string
	// AuthUser is who the session authenticated as; "" when it did not.
	AuthUser string
	// TLS reports whether the session was encrypted when DATA came.
	TLS bool
	// Data is the message as received.
	Data []byte
	// Mail is Data taken apart; ParseErr says why it could not be (Mail
	// then holds what was read before the error).
	Mail
	ParseErr error
}

// SMTPServer is a real SMTP server on 127.0.0.1 that keeps and parses
// what it receives, until the test ends.
type SMTPServer struct {
	// Addr is host:port to dial.
	Addr string
	// Cert is the certificate it presents (for StartTLS and Implicit):
	// trust Cert.Pool in a client, or write Cert.PEM as a CA file.
	Cert Cert

	o         SMTPOptions
	mu        sync.Mutex
	msgs      []SMTPMessage
	authTries int
}

// NewSMTPServer starts a server and stops it when the test ends.
func NewSMTPServer(t testing.TB, o SMTPOptions) *SMTPServer {
	t.Helper()
	s := &SMTPServer{o: o, Cert: o.Cert}
	if o.Mode != Plain && s.Cert.Pool == nil {
		s.Cert = NewCert(t)
	}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &smtpSession{srv: s, conn: c}, nil
	}))
	srv.Domain = "localhost"
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 10 * time.Second
	srv.AllowInsecureAuth = o.Mode == Plain
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	switch o.Mode {
	case StartTLS:
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{s.Cert.TLS}}
	case Implicit:
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{s.Cert.TLS}}
		l = tls.NewListener(l, srv.TLSConfig)
	}
	s.Addr = l.Addr().String()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		if o.Stall != nil {
			select {
			case <-o.Stall:
			default:
				close(o.Stall)
			}
		}
		srv.Close()
		if err := <-done; err != nil && !errors.Is(err, smtp.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			t.Errorf("smtp server: %v", err)
		}
	})
	return s
}

// Messages returns what the server has kept so far, in order.
func (s *SMTPServer) Messages() []SMTPMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SMTPMessage(nil), s.msgs...)
}

// AuthTries counts the AUTH attempts the server has seen.
func (s *SMTPServer) AuthTries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authTries
}

type smtpSession struct {
	srv      *SMTPServer
	conn     *smtp.Conn
	authUser string
	from, to string
}

func (ss *smtpSession) AuthMechanisms() []string {
	if ss.srv.o.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *smtpSession) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		ss.srv.mu.Lock()
		ss.srv.authTries++
		ss.srv.mu.Unlock()
		if username != ss.srv.o.Username || password != ss.srv.o.Password {
			return smtp.ErrAuthFailed
		}
		ss.authUser = username
		return nil
	}), nil
}

func (ss *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if ss.srv.o.Username != "" && ss.authUser == "" {
		return smtp.ErrAuthRequired
	}
	ss.from = from
	return nil
}

func (ss *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if ss.srv.o.RejectRcpt {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
	}
	ss.to = to
	return nil
}

func (ss *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if ss.srv.o.Stall != nil {
		<-ss.srv.o.Stall
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 0, 0}, Message: "stalled"}
	}
	_, isTLS := ss.conn.TLSConnectionState()
	m := SMTPMessage{EnvelopeFrom: ss.from, EnvelopeTo: ss.to, AuthUser: ss.authUser, TLS: isTLS, Data: b}
	m.Mail, m.ParseErr = ParseMail(b)
	ss.srv.mu.Lock()
	ss.srv.msgs = append(ss.srv.msgs, m)
	ss.srv.mu.Unlock()
	if ss.srv.o.OnData != nil {
		ss.srv.o.OnData()
	}
	return nil
}

func (ss *smtpSession) Reset()        { ss.from, ss.to = "", "" }
func (ss *smtpSession) Logout() error { return nil }
