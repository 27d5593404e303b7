package sidecar

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/mail"
	"github.com/prometheus/client_golang/prometheus"
)

// Outbox delivery timing. The backoff runs from 5s to 1h (sidecar.yaml
// says so); email.max_attempts decides when a message is dead. The lease
// is 10s, renewed while a batch is delivered: the rows of a process
// killed mid-batch are free to the others (polling every 5s) within 15s.
const (
	mailBackoffBase  = 5 * time.Second
	mailBackoffMax   = time.Hour
	MailPollInterval = 5 * time.Second
	mailLease        = 10 * time.Second
)

// MailTemplates loads the configured template overrides (or the built-in
// ones), executing each once so a broken file fails start-up and check.
func MailTemplates(cfg config.Config) (*mail.Templates, error) {
	t := cfg.Email.Templates
	files := map[mail.Kind]mail.TemplateFiles{
		mail.PasswordReset:     {Subject: t.PasswordReset.Subject, Text: t.PasswordReset.Text, HTML: t.PasswordReset.HTML},
		mail.EmailVerification: {Subject: t.EmailVerification.Subject, Text: t.EmailVerification.Text, HTML: t.EmailVerification.HTML},
	}
	tm, err := mail.LoadTemplates(files)
	if err != nil {
		return nil, fmt.Errorf("email.templates: %w", err)
	}
	return tm, nil
}

// NewSender builds the configured delivery; mailSecret is the SMTP
// password or the webhook signing secret (config.LoadMailSecret).
func NewSender(cfg config.Config, mailSecret config.Secret, log *slog.Logger) (mail.Sender, error) {
	e := cfg.Email
	switch e.Delivery {
	case config.DeliverySMTP:
		tm, err := MailTemplates(cfg)
		if err != nil {
			return nil, err
		}
		s, err := mail.NewSMTP(mail.SMTPOptions{
			Addr: e.SMTP.Addr, Username: e.SMTP.Username, Password: string(mailSecret.Bytes()),
			TLS: mail.TLSMode(e.SMTP.TLS), CAFile: e.SMTP.CAFile, From: e.From, Templates: tm,
		})
		if err != nil {
			return nil, fmt.Errorf("email.smtp: %w", err)
		}
		return s, nil
	case config.DeliveryWebhook:
		s, err := mail.NewWebhook(mail.WebhookOptions{URL: e.Webhook.URL, Secret: string(mailSecret.Bytes()), Timeout: e.Webhook.Timeout.D()})
		if err != nil {
			return nil, fmt.Errorf("email.webhook: %w", err)
		}
		return s, nil
	case config.DeliveryLog:
		if _, err := MailTemplates(cfg); err != nil {
			return nil, err
		}
		s, err := mail.NewLogSender(log)
		if err != nil {
			return nil, fmt.Errorf("email: %w", err)
		}
		return s, nil
	}
	return nil, nil
}

// mailWiring is the outbox's sealing box and delivery worker.
type mailWiring struct {
	box    *mail.Box
	worker *mail.Worker
}

// newMailWiring builds the outbox's box and delivery worker; nil when
// email.delivery is off.
func newMailWiring(cfg config.Config, secret, mailSecret config.Secret, q mail.Queue, log *slog.Logger, reg prometheus.Registerer) (*mailWiring, error) {
	if cfg.Email.Delivery == config.DeliveryOff {
		return nil, nil
	}
	sender, err := NewSender(cfg, mailSecret, log)
	if err != nil {
		return nil, err
	}
	box, err := mail.NewBox(secret.Bytes())
	if err != nil {
		return nil, fmt.Errorf("email: %w", err)
	}
	w, err := mail.NewWorker(mail.WorkerOptions{
		Queue: q, Box: box, Sender: sender, Delivery: string(cfg.Email.Delivery),
		Lease: mailLease, PollInterval: MailPollInterval, MaxAttempts: cfg.Email.MaxAttempts,
		BackoffBase: mailBackoffBase, BackoffMax: mailBackoffMax,
		Logger: log, Registerer: reg,
	})
	if err != nil {
		return nil, err
	}
	return &mailWiring{box: box, worker: w}, nil
}
