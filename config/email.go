package config

import (
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/netip"
	"strings"
	"time"
)

// maxWebhookTimeout is the delivery worker's bound on one attempt: a
// longer webhook timeout would never be reached.
const maxWebhookTimeout = 30 * time.Second

// maxMailAttempts bounds email.max_attempts: with the backoff capped at an
// hour, 100 attempts already span four days.
const maxMailAttempts = 100

// email checks the mail settings; auth.require_email_verification needs a
// way to send mail, so it is checked here too.
func (p *problems) email(c Config) {
	e := c.Email
	oneOf(p, "email.delivery", e.Delivery, DeliveryOff, DeliverySMTP, DeliveryWebhook, DeliveryLog)
	if c.Auth.RequireEmailVerification && e.Delivery == DeliveryOff {
		p.addRelated("auth.require_email_verification", "email.delivery",
			`needs a way to send the verification mail, and email.delivery is "off": set it to "smtp", "webhook" or "log"`)
	}
	if c.Auth.SendVerificationOnSignin && !c.Auth.RequireEmailVerification {
		p.addRelated("auth.send_verification_on_signin", "auth.require_email_verification",
			"only acts when auth.require_email_verification is true (sign-in is refused to unverified users only then)")
	}
	if c.Verifier() && e.Delivery != DeliveryOff {
		p.addRelated("email.delivery", "mode", `must be "off" in mode verifier, which serves no /api/auth/*`)
	}
	if e.MaxAttempts < 1 || e.MaxAttempts > maxMailAttempts {
		p.add("email.max_attempts", "must be between 1 and %d, got %d", maxMailAttempts, e.MaxAttempts)
	}
	switch e.Delivery {
	case DeliverySMTP:
		p.check("email.from", checkFrom(e.From))
		oneOf(p, "email.smtp.tls", e.SMTP.TLS, TLSStartTLS, TLSImplicit, TLSNone)
		if e.SMTP.Addr == "" {
			p.add("email.smtp.addr", `is required for delivery "smtp": the mail server's host:port, like smtp.example.com:587`)
		} else if err := checkHostPort(e.SMTP.Addr); err != nil {
			p.check("email.smtp.addr", err)
		} else if e.SMTP.TLS == TLSNone && !isLoopbackHost(e.SMTP.Addr) {
			p.addRelated("email.smtp.tls", "email.smtp.addr",
				`"none" is only allowed to a loopback address (mails carry working links): use "starttls" or "implicit" for %s`, e.SMTP.Addr)
		}
		if e.SMTP.Username != "" {
			p.check("email.smtp.password_env", checkEnvName(e.SMTP.PasswordEnv))
		}
	case DeliveryWebhook:
		p.check("email.webhook.secret_env", checkEnvName(e.Webhook.SecretEnv))
		p.positive("email.webhook.timeout", e.Webhook.Timeout)
		if e.Webhook.Timeout > Duration(maxWebhookTimeout) {
			p.add("email.webhook.timeout", "must be at most %s (one delivery attempt's bound), got %s", Duration(maxWebhookTimeout), e.Webhook.Timeout)
		}
		if e.Webhook.URL == "" {
			p.add("email.webhook.url", `is required for delivery "webhook": the application's endpoint, like https://app.example.com/hooks/auth-mail`)
		} else if err := checkWebhookURL(e.Webhook.URL); err != nil {
			p.check("email.webhook.url", err)
		}
	}
	for _, t := range []struct {
		path string
		f    TemplateFiles
	}{{"email.templates.password_reset", e.Templates.PasswordReset}, {"email.templates.email_verification", e.Templates.EmailVerification}} {
		if (t.f.Subject != "" || t.f.Text != "" || t.f.HTML != "") && e.Delivery == DeliveryOff {
			p.addRelated(t.path, "email.delivery", `is not used: email.delivery is "off"`)
		}
	}
}

// checkFrom wants one address, as a From header carries it.
func checkFrom(s string) error {
	if s == "" {
		return errors.New(`is required for delivery "smtp": the sender, like "Example <no-reply@example.com>"`)
	}
	if strings.ContainsAny(s, "\r\n") {
		return errors.New("must be one line")
	}
	if _, err := mail.ParseAddress(s); err != nil {
		return fmt.Errorf("%q is not a mail address: %v", s, err)
	}
	return nil
}

func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || !isPort(port, 1) {
		return fmt.Errorf("%q: want host:port, like smtp.example.com:587", s)
	}
	return checkHost(s)
}

// checkWebhookURL wants https, or http to a loopback address only: the
// body holds a working reset link.
func checkWebhookURL(s string) error {
	return checkSecureURL(s, "the body holds a working reset link")
}

// isLoopbackHost reports whether host[:port] names this machine: localhost
// or a loopback IP.
func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// LoadMailSecret reads the secret the delivery needs from the environment:
// the SMTP password (when a username is set) or the webhook signing
// secret. Empty for other deliveries. Messages never contain the value.
func (c Config) LoadMailSecret(getenv func(string) string) (Secret, error) {
	switch c.Email.Delivery {
	case DeliverySMTP:
		if c.Email.SMTP.Username == "" {
			return Secret{}, nil
		}
		name := c.Email.SMTP.PasswordEnv
		v := getenv(name)
		if v == "" {
			return Secret{}, fmt.Errorf("email.smtp.password_env: $%s is not set: export the SMTP password of %s", name, c.Email.SMTP.Username)
		}
		return NewSecret(v), nil
	case DeliveryWebhook:
		name := c.Email.Webhook.SecretEnv
		v := getenv(name)
		if v == "" {
			return Secret{}, fmt.Errorf("email.webhook.secret_env: $%s is not set: export the signing secret in its whsec_<base64> form (e.g. echo whsec_$(openssl rand -base64 32))", name)
		}
		if !strings.HasPrefix(v, "whsec_") {
			return Secret{}, fmt.Errorf("email.webhook.secret_env: $%s must be in the Standard Webhooks form whsec_<base64>", name)
		}
		return NewSecret(v), nil
	}
	return Secret{}, nil
}

// Email configures how password-reset and verification mails are
// delivered. Mails are queued in the database with their token and sent by
// a background worker with retries, so none is lost to a crash.
type Email struct {
	// Delivery is "off" (default: the mail endpoints answer 400), "smtp",
	// "webhook" (POST the message to the application, which mails it) or
	// "log" (write the message and its link to the log; development only).
	Delivery Delivery `yaml:"delivery"`
	// From is the sender address of SMTP mails, like
	// "Example <no-reply@example.com>". Required for smtp.
	From string `yaml:"from"`
	// MaxAttempts is how many deliveries of one message are tried before it
	// is marked dead (counted at each claim, so a try that kills the process
	// counts too; see "authsidecar outbox"). Default 10, between 1 and 100.
	// Retries back off exponentially from 5s to 1h.
	MaxAttempts int     `yaml:"max_attempts"`
	SMTP        SMTP    `yaml:"smtp"`
	Webhook     Webhook `yaml:"webhook"`
	// Templates override the built-in mails, per message type.
	Templates EmailTemplates `yaml:"templates"`
}

// SMTP configures delivery to a mail server.
type SMTP struct {
	// Addr is the server's host:port. Required for smtp.
	Addr string `yaml:"addr"`
	// Username enables AUTH (PLAIN, over TLS) when not empty.
	Username string `yaml:"username"`
	// PasswordEnv names the environment variable holding the password.
	// Default "SMTP_PASSWORD"; read only when Username is set.
	PasswordEnv string `yaml:"password_env"`
	// TLS is "starttls" (default; the server must offer it), "implicit"
	// (TLS from the first byte, port 465) or "none" (only to a loopback
	// address: mails carry working links).
	TLS SMTPTLS `yaml:"tls"`
	// CAFile is a PEM bundle of the CAs trusted for the server's
	// certificate, instead of the system roots (a private relay's CA).
	// Default empty: the system roots.
	CAFile string `yaml:"ca_file"`
}

// Webhook configures delivery by HTTP POST to the application.
type Webhook struct {
	// URL receives each message as signed JSON (Standard Webhooks). https,
	// or http only to a loopback address. Required for webhook.
	URL string `yaml:"url"`
	// SecretEnv names the environment variable holding the signing secret
	// in its "whsec_<base64>" form. Default "EMAIL_WEBHOOK_SECRET".
	SecretEnv string `yaml:"secret_env"`
	// Timeout bounds one delivery attempt. Default 10s, at most 30s.
	Timeout Duration `yaml:"timeout"`
}

// EmailTemplates names files that replace the built-in mail templates.
type EmailTemplates struct {
	PasswordReset     TemplateFiles `yaml:"password_reset"`
	EmailVerification TemplateFiles `yaml:"email_verification"`
}

// TemplateFiles are the parts of one mail. Empty: the built-in part. They
// are Go templates executed with the message (.URL, .To, .User.Name,
// .TokenExpiresAt, ...), checked at start-up and by "authsidecar check".
type TemplateFiles struct {
	// Subject is the subject line itself, a one-line text/template (not a
	// file name).
	Subject string `yaml:"subject"`
	// Text is the path of a text/template file: the text/plain part.
	Text string `yaml:"text"`
	// HTML is the path of an html/template file (values are escaped): the
	// text/html part.
	HTML string `yaml:"html"`
}
