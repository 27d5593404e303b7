package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/mailtest"
)

// TestResetTokenNotInAccessLog: following a mailed reset link must not
// write its token to the process log. The link's token is in the path
// (/api/auth/reset-password/<token>), and the access log (on by default)
// records the path; GET of the link does not spend the token, so the line
// holds a working reset credential for reset_token_ttl.
func TestResetTokenNotInAccessLog(t *testing.T) {
	dir := t.TempDir()
	srv := mailtest.NewSMTPServer(t, mailtest.SMTPOptions{})
	p, _, _ := mailBinary(t, dir, fmt.Sprintf(`{ delivery: smtp, from: "Acme <accounts@acme.example>", smtp: { addr: %q, tls: none } }`, srv.Addr))
	s := p.instance
	signUp(t, s, "ada@example.com", oldPassword)
	if res, body := s.do(t, "POST", "/api/auth/request-password-reset", `{"email":"ada@example.com"}`); res.StatusCode != 200 {
		t.Fatalf("request-password-reset: got %d %s", res.StatusCode, body)
	}
	link := mailLink(t, waitSMTP(t, srv, 1))
	tok := linkToken(t, link)
	if res, _ := get(t, link); res.StatusCode != 302 {
		t.Fatalf("GET the link: got %d, want 302", res.StatusCode)
	}
	time.Sleep(300 * time.Millisecond) // the access log is written after the answer
	for _, line := range strings.Split(s.stderr.String(), "\n") {
		if strings.Contains(line, tok) {
			t.Errorf("the process log holds the reset token (still valid: GET does not spend it):\n%s", line)
		}
	}
}
