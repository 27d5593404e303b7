// Package mailtest gives tests the real receiving end of a mail delivery:
// an SMTP server (emersion/go-smtp over TCP, plain, STARTTLS or implicit
// TLS, optionally with AUTH PLAIN) that keeps and parses what it receives,
// and an HTTP webhook receiver that checks every request against the
// Standard Webhooks specification with its own implementation, written
// from the specification rather than from package mail's sender, so a
// sender bug cannot be mirrored by the check.
//
// Both run on 127.0.0.1 until the test ends. They are used by package
// mail's tests and by the end-to-end tests on the built binary.
package mailtest
