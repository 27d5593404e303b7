package mail

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	netmail "net/mail"
	"os"
	"strconv"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// TLSMode is how the SMTP sender protects its connection.
type TLSMode string

// The TLS modes of SMTPOptions.TLS.
const (
	// TLSStartTLS connects in plain text and requires STARTTLS before
	// anything else (usually port 587); a server that does not offer it
	// is an error, never a silent downgrade.
	TLSStartTLS TLSMode = "starttls"
	// TLSImplicit speaks TLS from the first byte (SMTPS, usually port 465).
	TLSImplicit TLSMode = "implicit"
	// TLSNone sends in plain text. Allowed only to a loopback address (a
	// local relay), since the message carries a usable link.
	TLSNone TLSMode = "none"
)

// SMTPOptions configure an SMTP sender.
type SMTPOptions struct {
	// Addr is the server's host:port. Required.
	Addr string
	// Username and Password authenticate with AUTH PLAIN, only when
	// Username is not "" (no authentication otherwise). PLAIN is refused
	// over an unencrypted connection except to a loopback address.
	Username string
	Password string
	// TLS is the connection's protection; "" means TLSStartTLS.
	TLS TLSMode
	// TLSConfig, when not nil, is used (cloned) for STARTTLS and implicit
	// TLS, e.g. with test root CAs; nil means the system roots. Its
	// ServerName defaults to Addr's host, MinVersion to TLS 1.2.
	TLSConfig *tls.Config
	// CAFile is a PEM file of root CAs to trust instead of the system's
	// (a private relay's CA); "" means none. It replaces TLSConfig.RootCAs.
	CAFile string
	// From is the From address, "Name <addr@example.com>" or a bare
	// address. Required. Its domain is the right-hand side of Message-IDs.
	From string
	// Templates render subject and bodies; nil means DefaultTemplates().
	Templates *Templates
	// Timeout bounds each step of the SMTP conversation (connect, each
	// command, the data); 0 means 30s. The whole send is bounded by the
	// ctx given to Send as well.
	Timeout time.Duration
}

// SMTPSender sends multipart/alternative (text + HTML) mail through an
// SMTP server with github.com/wneessen/go-mail. It is safe for concurrent
// use: each Send opens its own connection.
type SMTPSender struct {
	host, port string
	tlsMode    TLSMode
	tlsConfig  *tls.Config
	username   string
	password   string
	from       *netmail.Address
	msgDomain  string
	templates  *Templates
	timeout    time.Duration
}

// NewSMTP checks o and returns a sender. Nothing is dialled here: the
// server may be down at start-up, and the outbox retries.
func NewSMTP(o SMTPOptions) (*SMTPSender, error) {
	host, port, err := net.SplitHostPort(o.Addr)
	if err != nil || host == "" {
		return nil, fmt.Errorf("smtp: addr %q: want host:port", o.Addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return nil, fmt.Errorf("smtp: addr %q: bad port", o.Addr)
	}
	s := &SMTPSender{
		host: host, port: port, tlsMode: o.TLS,
		username: o.Username, password: o.Password,
		templates: o.Templates, timeout: o.Timeout,
	}
	switch s.tlsMode {
	case "":
		s.tlsMode = TLSStartTLS
	case TLSStartTLS, TLSImplicit:
	case TLSNone:
		if !isLoopbackHost(host) {
			return nil, fmt.Errorf("smtp: tls none is only allowed to a loopback address (127.0.0.0/8, ::1, localhost), not %q: the message carries a usable link", host)
		}
	default:
		return nil, fmt.Errorf("smtp: tls %q: want starttls, implicit or none", o.TLS)
	}
	if o.Password != "" && o.Username == "" {
		return nil, errors.New("smtp: a password without a username")
	}
	if s.from, err = netmail.ParseAddress(o.From); err != nil {
		return nil, fmt.Errorf("smtp: from %q: %w", o.From, err)
	}
	at := strings.LastIndexByte(s.from.Address, '@')
	s.msgDomain = s.from.Address[at+1:]
	if s.templates == nil {
		s.templates = DefaultTemplates()
	}
	if s.timeout <= 0 {
		s.timeout = 30 * time.Second
	}
	s.tlsConfig = &tls.Config{}
	if o.TLSConfig != nil {
		s.tlsConfig = o.TLSConfig.Clone()
	}
	if s.tlsConfig.ServerName == "" {
		s.tlsConfig.ServerName = host
	}
	if s.tlsConfig.MinVersion < tls.VersionTLS12 {
		s.tlsConfig.MinVersion = tls.VersionTLS12
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("smtp: ca file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("smtp: ca file %s: no PEM certificate in it", o.CAFile)
		}
		s.tlsConfig.RootCAs = pool
	}
	return s, nil
}

// isLoopbackHost reports whether host is a loopback IP literal or
// "localhost" (which Go's resolver and every sane hosts file map to
// loopback; the dialler checks the address it actually reached as well).
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// MessageID is the Message-ID (without angle brackets) of the message
// stored under outbox id: the same on every attempt, so a receiver or a
// mail client can tell a re-send after a crash from a new message.
func (s *SMTPSender) MessageID(id string) string { return id + "@" + s.msgDomain }

// Send renders m and delivers it in one SMTP session.
func (s *SMTPSender) Send(ctx context.Context, m Message, id string) error {
	if !validID(id) {
		return fmt.Errorf("smtp: outbox id %q is not usable in a Message-ID", id)
	}
	r, err := s.templates.Render(m)
	if err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	msg := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	msg.FromMailAddress(s.from)
	if err := msg.To(m.To); err != nil {
		return fmt.Errorf("smtp: recipient: %w", err)
	}
	msg.Subject(r.Subject)
	msg.SetMessageIDWithValue(s.MessageID(id))
	msg.SetDate()
	// RFC 3834: an automatic message; vacation responders stay quiet.
	msg.SetGenHeader(gomail.Header("Auto-Submitted"), "auto-generated")
	msg.SetBodyString(gomail.TypeTextPlain, r.Text)
	msg.AddAlternativeString(gomail.TypeTextHTML, r.HTML)

	opts := []gomail.Option{
		gomail.WithPort(mustPort(s.port)),
		gomail.WithTimeout(s.timeout),
		gomail.WithTLSConfig(s.tlsConfig),
	}
	d := &dialer{s: s, ctx: ctx}
	defer d.release()
	opts = append(opts, gomail.WithDialContextFunc(d.dial))
	switch s.tlsMode {
	case TLSStartTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	case TLSImplicit, TLSNone:
		// Implicit TLS is done by our dialler (go-mail's own SSL dialler
		// is bypassed by a custom dial function); no STARTTLS on top.
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	}
	if s.username != "" {
		// SMTPAuthPlain refuses to send the password unless the
		// connection is TLS or the server is loopback.
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthPlain),
			gomail.WithUsername(s.username), gomail.WithPassword(s.password))
	}
	c, err := gomail.NewClient(s.host, opts...)
	if err != nil {
		return fmt.Errorf("smtp: client: %w", err)
	}
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("smtp %s: %w (%w)", net.JoinHostPort(s.host, s.port), ctx.Err(), err)
		}
		return fmt.Errorf("smtp %s: %w", net.JoinHostPort(s.host, s.port), err)
	}
	return nil
}

// dialer dials for one Send. It does the implicit TLS handshake itself,
// checks that "none" really reached a loopback address, and closes the
// connection when the Send's ctx ends: go-mail bounds each step with its
// own timeout but watches ctx only while dialling, and a send must not
// outlive the worker's lease.
type dialer struct {
	s     *SMTPSender
	ctx   context.Context
	stops []func() bool
}

func (d *dialer) dial(dctx context.Context, network, addr string) (net.Conn, error) {
	nd := &net.Dialer{Timeout: d.s.timeout}
	var conn net.Conn
	var err error
	if d.s.tlsMode == TLSImplicit {
		conn, err = (&tls.Dialer{NetDialer: nd, Config: d.s.tlsConfig}).DialContext(dctx, network, addr)
	} else {
		conn, err = nd.DialContext(dctx, network, addr)
	}
	if err != nil {
		return nil, err
	}
	if d.s.tlsMode == TLSNone {
		if ta, ok := conn.RemoteAddr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
			conn.Close()
			return nil, fmt.Errorf("tls none: %s is not a loopback address", conn.RemoteAddr())
		}
	}
	// Closing the connection unblocks any read or write in progress.
	d.stops = append(d.stops, context.AfterFunc(d.ctx, func() { conn.Close() }))
	return conn, nil
}

// release unregisters the close-on-cancel hooks once Send is over.
func (d *dialer) release() {
	for _, stop := range d.stops {
		stop()
	}
}

func mustPort(p string) int {
	n, _ := strconv.Atoi(p) // checked in NewSMTP
	return n
}

// validID reports whether id is safe as the local part of a Message-ID
// and as a header value: the characters NewID produces, and a few more.
func validID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
