package mail

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// testCert is a self-signed certificate for 127.0.0.1, ::1 and localhost,
// and the pool that trusts it.
type testCert struct {
	cert tls.Certificate
	pool *x509.CertPool
	pem  []byte
}

func newTestCert(t *testing.T) testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "authsidecar test SMTP"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return testCert{
		cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		pool: pool,
		pem:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}
}

// received is one message as the test SMTP server took it.
type received struct {
	from, to string
	authUser string // "" when the session did not authenticate
	tls      bool   // the session was encrypted when DATA came
	data     []byte
}

// smtpServer is a real SMTP server (emersion/go-smtp) on 127.0.0.1 that
// keeps what it receives.
type smtpServer struct {
	addr string

	// user and pass, when user is set, are the only accepted AUTH PLAIN
	// credentials, and MAIL is refused before authentication.
	user, pass string
	// stall, when not nil, makes DATA block until it is closed.
	stall chan struct{}
	// rejectRcpt answers every RCPT with 550.
	rejectRcpt bool
	// onData, when not nil, is called after each message is kept.
	onData func()

	mu        sync.Mutex
	msgs      []received
	authTries int
}

type serverMode int

const (
	plainServer    serverMode = iota // no TLS at all
	startTLSServer                   // offers STARTTLS
	implicitServer                   // TLS from the first byte
)

// start listens on 127.0.0.1:0 and serves until the test ends.
func (s *smtpServer) start(t testing.TB, mode serverMode, cert testCert) {
	t.Helper()
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &smtpSession{srv: s, conn: c}, nil
	}))
	srv.Domain = "localhost"
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 10 * time.Second
	// The plain server still offers AUTH, so a client that sends its
	// password in clear over a non-loopback link would be caught by the
	// client, not by the server's politeness.
	srv.AllowInsecureAuth = mode == plainServer
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	switch mode {
	case startTLSServer:
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert.cert}}
	case implicitServer:
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert.cert}}
		l = tls.NewListener(l, srv.TLSConfig)
	}
	s.addr = l.Addr().String()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		if s.stall != nil {
			select {
			case <-s.stall:
			default:
				close(s.stall)
			}
		}
		srv.Close()
		if err := <-done; err != nil && !errors.Is(err, smtp.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			t.Errorf("smtp server: %v", err)
		}
	})
}

func (s *smtpServer) messages() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.msgs...)
}

type smtpSession struct {
	srv      *smtpServer
	conn     *smtp.Conn
	authUser string
	from, to string
}

func (ss *smtpSession) AuthMechanisms() []string {
	if ss.srv.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *smtpSession) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		ss.srv.mu.Lock()
		ss.srv.authTries++
		ss.srv.mu.Unlock()
		if username != ss.srv.user || password != ss.srv.pass {
			return smtp.ErrAuthFailed
		}
		ss.authUser = username
		return nil
	}), nil
}

func (ss *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if ss.srv.user != "" && ss.authUser == "" {
		return smtp.ErrAuthRequired
	}
	ss.from = from
	return nil
}

func (ss *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if ss.srv.rejectRcpt {
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
	if ss.srv.stall != nil {
		<-ss.srv.stall
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 0, 0}, Message: "stalled"}
	}
	_, isTLS := ss.conn.TLSConnectionState()
	ss.srv.mu.Lock()
	ss.srv.msgs = append(ss.srv.msgs, received{from: ss.from, to: ss.to, authUser: ss.authUser, tls: isTLS, data: b})
	ss.srv.mu.Unlock()
	if ss.srv.onData != nil {
		ss.srv.onData()
	}
	return nil
}

func (ss *smtpSession) Reset()        { ss.from, ss.to = "", "" }
func (ss *smtpSession) Logout() error { return nil }
