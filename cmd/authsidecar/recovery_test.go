package main

import (
	"bytes"
	"fmt"
	"html"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/mailtest"
	"github.com/authsidecar/authsidecar/internal/pgtest"
	"github.com/authsidecar/authsidecar/sidecar"
)

// These tests run the built binary with mail delivery on, against a real
// SMTP server and a real Standard Webhooks receiver (internal/mailtest):
// the recovery flows by mailed link, the outbox across a stop or a kill -9
// with the receiver down, replicas on one PostgreSQL delivering each
// message once, the operator commands, and what the database file holds.

// mailLimits turns off the limits that would refuse these tests' bursts
// from one address and one IP; the limits have tests of their own.
const mailLimits = `limits: { signup_per_ip: "off", signin_per_ip: "off", mail_per_ip: "off", mail_per_email: "off", token_per_ip: "off" }`

const (
	oldPassword = "correct-horse-battery"
	newPassword = "new-horse-battery-staple"
)

// mailBinary writes a SQLite config in dir whose base_url is the binary's
// own address, so the mailed links work against it, with email as the
// email section, and starts the binary with AUTH_SECRET and env. A
// verification link signs in there (auth.sign_in_after_verification:
// checkVerifyLink follows the whole flow; the default, off, is
// TestAbuseBinary's).
func mailBinary(t *testing.T, dir, email string, env ...string) (p *process, cfgPath string, port int) {
	t.Helper()
	cfgPath, port = writeConfig(t, dir, fmt.Sprintf("upstream: %q\n%s\nemail: %s\nauth: { sign_in_after_verification: true }\n", echoUpstream(t).URL, mailLimits, email))
	env = append([]string{"AUTH_SECRET=" + e2eSecret}, env...)
	return startBinary(t, cfgPath, port, env...), cfgPath, port
}

// noRedirect shows a redirect instead of following it.
var noRedirect = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// get is a GET that shows redirects rather than following them.
func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	res, err := noRedirect.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	bodyTo(&b, res)
	return res, b.String()
}

// waitUntil polls cond every 20ms until it holds, failing the test after d.
func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mailMetric sums an outbox counter over both message types.
func mailMetric(t *testing.T, p *process, name string) float64 {
	t.Helper()
	sum := 0.0
	for _, typ := range []string{"password_reset", "email_verification"} {
		v, _, _ := metricValue(t, p.metrics, name, map[string]string{"type": typ})
		sum += v
	}
	return sum
}

// waitSMTP waits for the SMTP server's nth message and returns it parsed.
func waitSMTP(t *testing.T, srv *mailtest.SMTPServer, n int) mailtest.SMTPMessage {
	t.Helper()
	waitUntil(t, fmt.Sprintf("mail #%d", n), 15*time.Second, func() bool { return len(srv.Messages()) >= n })
	m := srv.Messages()[n-1]
	if m.ParseErr != nil {
		t.Fatalf("mail #%d does not parse: %v\n%s", n, m.ParseErr, m.Data)
	}
	return m
}

// mailLink is the one link in m's text part, which must also be the HTML
// part's button.
func mailLink(t *testing.T, m mailtest.SMTPMessage) string {
	t.Helper()
	var links []string
	for _, w := range strings.Fields(m.Text) {
		if strings.HasPrefix(w, "http://") || strings.HasPrefix(w, "https://") {
			links = append(links, w)
		}
	}
	if len(links) != 1 {
		t.Fatalf("text part: got links %q, want one\n%s", links, m.Text)
	}
	if !strings.Contains(m.HTML, `href="`+html.EscapeString(links[0])+`"`) {
		t.Errorf("html part lacks the link %s:\n%s", links[0], m.HTML)
	}
	return links[0]
}

// linkToken is the token in a mailed link: the last path segment of a
// reset link, the token parameter of a verification link.
func linkToken(t *testing.T, link string) string {
	t.Helper()
	u, err := neturl.Parse(link)
	if err != nil {
		t.Fatalf("link %q: %v", link, err)
	}
	tok := u.Query().Get("token")
	if rest, ok := strings.CutPrefix(u.Path, "/api/auth/reset-password/"); ok {
		tok = rest
	}
	if len(tok) < 43 {
		t.Fatalf("link %q: no token of 32 bytes or more", link)
	}
	return tok
}

// signIn returns the status of a sign-in with password.
func signIn(t *testing.T, s *instance, email, password string) int {
	t.Helper()
	res, _ := s.do(t, "POST", "/api/auth/sign-in/email", fmt.Sprintf(`{"email":%q,"password":%q}`, email, password))
	return res.StatusCode
}

// checkResetLink walks a reset link as a user does: the link lands on the
// built-in page with its token, the new password is set, then the old
// password and the old cookie session (when given) no longer work, the
// new password does, and the link is refused when used again.
func checkResetLink(t *testing.T, s *instance, link, email, oldCookie string) {
	t.Helper()
	if !strings.HasPrefix(link, s.base+"/api/auth/reset-password/") {
		t.Fatalf("reset link %q is not on %s", link, s.base)
	}
	tok := linkToken(t, link)
	res, _ := get(t, link)
	loc, _ := neturl.Parse(res.Header.Get("Location"))
	if res.StatusCode != 302 || loc == nil || loc.Path != "/api/auth/reset-password-page" || loc.Query().Get("token") != tok {
		t.Fatalf("GET the link: got %d Location %q, want 302 to the reset page with token=", res.StatusCode, res.Header.Get("Location"))
	}
	res, page := get(t, s.base+loc.RequestURI())
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") ||
		res.Header.Get("Content-Security-Policy") == "" || !strings.Contains(page, `name="token" value="`+tok+`"`) {
		t.Fatalf("the reset page: got %d %q CSP %q, want 200 HTML with the token in its form\n%s", res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Content-Security-Policy"), page)
	}
	reset := fmt.Sprintf(`{"newPassword":%q,"token":%q}`, newPassword, tok)
	if res, body := s.do(t, "POST", "/api/auth/reset-password", reset); res.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"status":true}` {
		t.Fatalf("reset-password: got %d %s, want 200 {\"status\":true}", res.StatusCode, body)
	}
	if got := signIn(t, s, email, oldPassword); got != 401 {
		t.Errorf("sign-in with the old password: got %d, want 401", got)
	}
	if got := signIn(t, s, email, newPassword); got != 200 {
		t.Errorf("sign-in with the new password: got %d, want 200", got)
	}
	if oldCookie != "" {
		if res, body := s.do(t, "GET", "/api/auth/get-session", "", "Cookie", oldCookie); res.StatusCode != 200 || strings.TrimSpace(string(body)) != "null" {
			t.Errorf("get-session with the cookie from before the reset: got %d %s, want 200 null", res.StatusCode, body)
		}
	}
	if res, body := s.do(t, "POST", "/api/auth/reset-password", reset); res.StatusCode != 400 || jsonCode(body) != "INVALID_TOKEN" {
		t.Errorf("the used token again: got %d %s, want 400 INVALID_TOKEN", res.StatusCode, body)
	}
	if res, _ := get(t, link); res.StatusCode != 302 || !strings.Contains(res.Header.Get("Location"), "error=INVALID_TOKEN") {
		t.Errorf("the used link again: got %d Location %q, want 302 with error=INVALID_TOKEN", res.StatusCode, res.Header.Get("Location"))
	}
}

// checkVerifyLink follows a verification link. As mailed, it carries
// callbackURL=/ (as Better Auth's does): 302 to / with a session cookie
// of the now verified user, and used again 302 with error=INVALID_TOKEN.
// Without its callbackURL (asMailed false): 200 {"status":true,"user":null}
// with the cookie, and used again 401 INVALID_TOKEN.
func checkVerifyLink(t *testing.T, s *instance, link, email string, asMailed bool) {
	t.Helper()
	if !strings.HasPrefix(link, s.base+"/api/auth/verify-email?token=") || !strings.HasSuffix(link, "&callbackURL=%2F") {
		t.Fatalf("verification link %q is not on %s with callbackURL=/", link, s.base)
	}
	if !asMailed {
		link = strings.TrimSuffix(link, "&callbackURL=%2F")
	}
	res, body := get(t, link)
	var cookie string
	for _, c := range res.Cookies() {
		if c.Name == "auth.session_token" && c.Value != "" {
			cookie = c.Name + "=" + c.Value
		}
	}
	switch {
	case cookie == "":
		t.Fatalf("GET the verification link: got %d %s, no session cookie", res.StatusCode, body)
	case asMailed && (res.StatusCode != 302 || res.Header.Get("Location") != "/"):
		t.Fatalf("GET the verification link as mailed: got %d Location %q, want 302 to /", res.StatusCode, res.Header.Get("Location"))
	case !asMailed && (res.StatusCode != 200 || strings.TrimSpace(body) != `{"status":true,"user":null}`):
		t.Fatalf("GET the verification link without callbackURL: got %d %s, want 200 {\"status\":true,\"user\":null}", res.StatusCode, body)
	}
	res, session := s.do(t, "GET", "/api/auth/get-session", "", "Cookie", cookie)
	if res.StatusCode != 200 || !strings.Contains(string(session), `"email":"`+email+`"`) || !strings.Contains(string(session), `"emailVerified":true`) {
		t.Errorf("get-session with the cookie the link set: got %d %s, want %s verified", res.StatusCode, session, email)
	}
	checkVerifyRefused(t, link, asMailed)
}

// checkVerifyRefused: a used or replaced verification link is refused, as
// an invalid one.
func checkVerifyRefused(t *testing.T, link string, withCallback bool) {
	t.Helper()
	res, body := get(t, link)
	switch {
	case withCallback && (res.StatusCode != 302 || !strings.HasSuffix(res.Header.Get("Location"), "/?error=INVALID_TOKEN")):
		t.Errorf("a spent verification link: got %d Location %q, want 302 to /?error=INVALID_TOKEN", res.StatusCode, res.Header.Get("Location"))
	case !withCallback && (res.StatusCode != 401 || jsonCode([]byte(body)) != "INVALID_TOKEN"):
		t.Errorf("a spent verification link: got %d %s, want 401 INVALID_TOKEN", res.StatusCode, body)
	}
}

// dbBytes reads the SQLite database in dir with its -wal and -shm.
func dbBytes(t *testing.T, dir string) []byte {
	t.Helper()
	var all []byte
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(filepath.Join(dir, "auth.db"+suffix))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// checkNoTokens fails for every token found in plain text in db.
func checkNoTokens(t *testing.T, what string, db []byte, tokens []string) {
	t.Helper()
	if len(tokens) == 0 {
		t.Fatal("no tokens to look for")
	}
	for _, tok := range tokens {
		if bytes.Contains(db, []byte(tok)) {
			t.Errorf("%s holds the link token %s in plain text", what, tok)
		}
	}
}

// postResets posts request-password-reset for email(i) to base(i), for i
// in [0, n), from clients concurrent clients. A 503 (the detached intake
// behind the answers is full) is retried after 5ms, as a client would
// after Retry-After, and counted in busy; errs is what failed otherwise.
func postResets(n, clients int, base, email func(i int) string) (errs []string, busy int) {
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	deadline := time.Now().Add(time.Minute)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var err error
				for {
					var res *http.Response
					res, err = http.Post(base(i)+"/api/auth/request-password-reset", "application/json", strings.NewReader(fmt.Sprintf(`{"email":%q}`, email(i))))
					if err != nil {
						break
					}
					res.Body.Close()
					if res.StatusCode == http.StatusServiceUnavailable && time.Now().Before(deadline) {
						mu.Lock()
						busy++
						mu.Unlock()
						time.Sleep(5 * time.Millisecond)
						continue
					}
					if res.StatusCode != 200 {
						err = fmt.Errorf("status %d", res.StatusCode)
					}
					break
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Sprintf("request-password-reset %d: %v", i, err))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return errs, busy
}

// outboxRow is one line of "outbox list".
type outboxRow struct {
	typ, state, attempts string
}

func outboxRows(t *testing.T, out string) map[string]outboxRow {
	t.Helper()
	rows := map[string]outboxRow{}
	tab := table(out)
	if strings.TrimSpace(out) == "no messages" {
		return rows
	}
	if len(tab) == 0 || strings.Join(tab[0][:4], " ") != "ID TYPE STATE ATTEMPTS" {
		t.Fatalf("outbox list: unexpected output\n%s", out)
	}
	for _, r := range tab[1:] {
		if len(r) < 5 {
			t.Fatalf("outbox list: short row %q", r)
		}
		rows[r[0]] = outboxRow{typ: r[1], state: r[2], attempts: r[3]}
	}
	return rows
}

// TestRecoveryBySMTP: the binary mails through a real SMTP server, plain
// to loopback and with STARTTLS, its ca_file and AUTH; each mail is a
// multipart text and HTML message whose link works end to end.
func TestRecoveryBySMTP(t *testing.T) {
	tests := []struct {
		name     string
		server   mailtest.SMTPOptions
		smtp     func(addr, caFile string) string // the email.smtp section
		env      []string
		wantTLS  bool
		wantAuth string
	}{
		{
			name:   "tls none to loopback",
			server: mailtest.SMTPOptions{},
			smtp:   func(addr, _ string) string { return fmt.Sprintf("{ addr: %q, tls: none }", addr) },
		},
		{
			name:   "starttls with ca_file and a password",
			server: mailtest.SMTPOptions{Mode: mailtest.StartTLS, Username: "relay", Password: "relay-pw-0123"},
			smtp: func(addr, caFile string) string {
				return fmt.Sprintf("{ addr: %q, tls: starttls, ca_file: %q, username: relay, password_env: SMTP_PASSWORD }", addr, caFile)
			},
			env:     []string{"SMTP_PASSWORD=relay-pw-0123"},
			wantTLS: true, wantAuth: "relay",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			srv := mailtest.NewSMTPServer(t, tt.server)
			caFile := filepath.Join(dir, "ca.pem")
			if tt.server.Mode != mailtest.Plain {
				writeFile(t, caFile, string(srv.Cert.PEM))
			}
			p, _, _ := mailBinary(t, dir, fmt.Sprintf(`{ delivery: smtp, from: "Acme Accounts <accounts@acme.example>", smtp: %s }`, tt.smtp(srv.Addr, caFile)), tt.env...)
			s := p.instance

			cookie, _ := signUp(t, s, "ada@example.com", oldPassword)
			if res, body := s.do(t, "POST", "/api/auth/request-password-reset", `{"email":"ada@example.com"}`); res.StatusCode != 200 {
				t.Fatalf("request-password-reset: got %d %s", res.StatusCode, body)
			}
			reset := waitSMTP(t, srv, 1)
			signUp(t, s, "bob@example.com", oldPassword)
			// Twice, the second after the first mail is out (the work
			// runs behind the answer): the second link replaces the first.
			var verifyMails []mailtest.SMTPMessage
			for i := range 2 {
				if res, body := s.do(t, "POST", "/api/auth/send-verification-email", `{"email":"bob@example.com"}`); res.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"status":true}` {
					t.Fatalf("send-verification-email: got %d %s", res.StatusCode, body)
				}
				verifyMails = append(verifyMails, waitSMTP(t, srv, 2+i))
			}
			replaced, verify := verifyMails[0], verifyMails[1]

			for _, c := range []struct {
				m           mailtest.SMTPMessage
				to, subject string
			}{{reset, "ada@example.com", "Reset your password"}, {replaced, "bob@example.com", "Verify your email address"}, {verify, "bob@example.com", "Verify your email address"}} {
				m := c.m
				if m.EnvelopeFrom != "accounts@acme.example" || m.EnvelopeTo != c.to || m.TLS != tt.wantTLS || m.AuthUser != tt.wantAuth {
					t.Errorf("%s: envelope %s -> %s, TLS %v, AUTH %q; want accounts@acme.example -> %s, TLS %v, AUTH %q",
						c.subject, m.EnvelopeFrom, m.EnvelopeTo, m.TLS, m.AuthUser, c.to, tt.wantTLS, tt.wantAuth)
				}
				if m.ContentType != "multipart/alternative" || strings.Join(m.Parts, ",") != "text/plain,text/html" {
					t.Errorf("%s: %s with parts %v, want multipart/alternative of text/plain, text/html", c.subject, m.ContentType, m.Parts)
				}
				if m.From.Address != "accounts@acme.example" || m.From.Name != "Acme Accounts" || m.To.Address != c.to || m.Subject != c.subject {
					t.Errorf("headers: From %v, To %v, Subject %q; want Acme Accounts, %s, %q", m.From, m.To, m.Subject, c.to, c.subject)
				}
				id, prefixed := strings.CutPrefix(m.MessageID, "<msg_")
				id, suffixed := strings.CutSuffix(id, "@acme.example>")
				if !prefixed || !suffixed || len(id) < 26 {
					t.Errorf("%s: Message-ID %q, want <msg_...@acme.example> (the outbox id)", c.subject, m.MessageID)
				}
			}
			resetLink, replacedLink, verifyLink := mailLink(t, reset), mailLink(t, replaced), mailLink(t, verify)
			checkResetLink(t, s, resetLink, "ada@example.com", cookie)
			checkVerifyRefused(t, replacedLink, true)
			checkVerifyLink(t, s, verifyLink, "bob@example.com", false)
			if n := len(srv.Messages()); n != 3 {
				t.Errorf("the SMTP server got %d messages, want 3", n)
			}
			checkNoTokens(t, "the database", dbBytes(t, dir), []string{linkToken(t, resetLink), linkToken(t, replacedLink), linkToken(t, verifyLink)})
		})
	}
}

// TestRecoveryOutboxSurvivesRestart is the durability case: mail
// queued while the webhook receiver is down, the binary stopped (SIGTERM,
// or kill -9) and started again on the same SQLite file, the receiver
// brought up: every message arrives exactly once (by webhook-id), signed,
// and its link works; the database never held a link in plain text.
func TestRecoveryOutboxSurvivesRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(*testing.T, *process)
	}{
		{"SIGTERM", func(t *testing.T, p *process) {
			if err := p.stop(); err != nil {
				t.Errorf("stop on SIGTERM: %v", err)
			}
		}},
		{"kill -9", func(_ *testing.T, p *process) { p.kill() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			secret := mailtest.NewWebhookSecret(t)
			recv := mailtest.NewWebhookReceiver(t, secret)
			recv.Down()
			env := []string{"EMAIL_WEBHOOK_SECRET=" + secret}
			p, cfg, port := mailBinary(t, dir, fmt.Sprintf("{ delivery: webhook, webhook: { url: %q } }", recv.URL), env...)
			s := p.instance

			users := []string{"ann@example.com", "bob@example.com", "cat@example.com"}
			cookies := map[string]string{}
			want := map[string]bool{} // "type to" of every message queued
			for _, u := range users {
				cookies[u], _ = signUp(t, s, u, oldPassword)
			}
			for _, u := range users {
				if res, body := s.do(t, "POST", "/api/auth/request-password-reset", fmt.Sprintf(`{"email":%q}`, u)); res.StatusCode != 200 {
					t.Fatalf("request-password-reset %s: got %d %s", u, res.StatusCode, body)
				}
				want["password_reset "+u] = true
			}
			if res, body := s.do(t, "POST", "/api/auth/send-verification-email", `{"email":"cat@example.com"}`); res.StatusCode != 200 {
				t.Fatalf("send-verification-email: got %d %s", res.StatusCode, body)
			}
			want["email_verification cat@example.com"] = true

			// Every message queued and attempted (and failed) at least once.
			// A claim counts as an attempt before its send fails, so the
			// failures are waited for in the metrics too.
			var queued map[string]outboxRow
			waitUntil(t, "every message attempted while the receiver is down", 20*time.Second, func() bool {
				if mailMetric(t, p, "authsidecar_mail_failed_attempts_total") < float64(len(want)) {
					return false
				}
				stdout, _, err := runWithEnv(map[string]string{}, "", argv(cfg, "outbox list")...)
				if err != nil {
					t.Fatalf("outbox list: %v", err)
				}
				queued = outboxRows(t, stdout)
				for _, r := range queued {
					if r.state != "pending" || r.attempts == "0" {
						return false
					}
				}
				return len(queued) == len(want)
			})
			if got := mailMetric(t, p, "authsidecar_mail_failed_attempts_total"); got < float64(len(want)) {
				t.Errorf("failed attempts in the metrics: got %v, want at least %d", got, len(want))
			}
			tc.stop(t, p)
			atRest := dbBytes(t, dir)
			for id := range queued {
				if !bytes.Contains(atRest, []byte(id)) {
					t.Fatalf("the stopped database lacks outbox row %s: the snapshot proves nothing", id)
				}
			}

			p2 := startBinary(t, cfg, port, append(env, "AUTH_SECRET="+e2eSecret)...)
			s2 := p2.instance
			recv.Up()
			if !recv.WaitDelivered(len(want), 30*time.Second) {
				t.Fatalf("%d of %d messages delivered within 30s of the restart", recv.Delivered(), len(want))
			}
			time.Sleep(sidecar.MailPollInterval + time.Second) // a poll more: nothing is sent again

			got := recv.Deliveries()
			links := map[string]string{}
			var tokens []string
			for id, hs := range got {
				if _, ok := queued[id]; !ok {
					t.Errorf("delivered webhook-id %s is not one of the queued rows %v", id, queued)
				}
				if len(hs) != 1 {
					t.Errorf("webhook-id %s delivered %d times, want exactly once", id, len(hs))
				}
				pl := hs[0].Payload
				key := pl.Type + " " + pl.To
				if !want[key] || pl.User.Email != pl.To {
					t.Errorf("delivered %q (user %+v), want one of %v", key, pl.User, want)
				}
				if exp, err := time.Parse(time.RFC3339, pl.TokenExpiresAt); err != nil || !exp.After(time.Now()) {
					t.Errorf("token_expires_at %q: want RFC 3339 in the future (%v)", pl.TokenExpiresAt, err)
				}
				links[key] = pl.URL
				tokens = append(tokens, linkToken(t, pl.URL))
			}
			if len(got) != len(want) || len(links) != len(want) {
				t.Errorf("delivered %d messages (%v), want %d", len(got), links, len(want))
			}
			if n := len(recv.Requests()); n != len(want) {
				t.Errorf("the receiver was asked %d times once up, want %d: one request per message", n, len(want))
			}
			if r := recv.Rejected(); len(r) != 0 {
				t.Errorf("the receiver refused %v", r)
			}
			if got := mailMetric(t, p2, "authsidecar_mail_delivered_total"); got != float64(len(want)) {
				t.Errorf("delivered after the restart in the metrics: got %v, want %d", got, len(want))
			}

			// The links survived sealed; the session from before the stop
			// ends with the reset.
			checkResetLink(t, s2, links["password_reset ann@example.com"], "ann@example.com", cookies["ann@example.com"])
			checkVerifyLink(t, s2, links["email_verification cat@example.com"], "cat@example.com", true)

			// An operator's link for bob, printed by the binary, works
			// against the running one; it queues nothing.
			cliLink, note := binaryCLI(t, env, argv(cfg, "users reset-link", "bob@example.com")...)
			cliLink = strings.TrimSpace(cliLink)
			if !strings.Contains(note, "single use") {
				t.Errorf("users reset-link stderr: got %q", note)
			}
			checkResetLink(t, s2, cliLink, "bob@example.com", cookies["bob@example.com"])
			tokens = append(tokens, linkToken(t, cliLink))

			list, _ := binaryCLI(t, env, argv(cfg, "outbox list")...)
			rows := outboxRows(t, list)
			if len(rows) != len(want) {
				t.Errorf("outbox list: %d rows, want %d\n%s", len(rows), len(want), list)
			}
			for id, r := range rows {
				if _, ok := got[id]; !ok || r.state != "delivered" {
					t.Errorf("outbox list row %s: %+v, want a delivered message", id, r)
				}
			}
			for _, tok := range tokens {
				if strings.Contains(list, tok) {
					t.Errorf("outbox list shows a link token:\n%s", list)
				}
			}
			checkNoTokens(t, "the database at rest with mail queued", atRest, tokens)
			checkNoTokens(t, "the database after delivery", dbBytes(t, dir), tokens)
		})
	}
}

// TestRecoveryReplicasDeliverOnce: two replicas on one PostgreSQL, each
// queueing resets and running its own delivery worker on the shared
// outbox: every message reaches the receiver exactly once.
func TestRecoveryReplicasDeliverOnce(t *testing.T) {
	const users, perUser = 10, 6
	url := pgtest.URL(t)
	secret := mailtest.NewWebhookSecret(t)
	recv := mailtest.NewWebhookReceiver(t, secret)
	rs := startReplicas(t, 2, url, echoUpstream(t).URL, fmt.Sprintf("email: { delivery: webhook, webhook: { url: %q } }", recv.URL), "EMAIL_WEBHOOK_SECRET="+secret)
	email := func(i int) string { return fmt.Sprintf("user%d@example.com", i%users) }
	for i := range users {
		signUp(t, rs[i%2].instance, email(i), oldPassword)
	}

	// users*perUser resets at once from 6 clients, alternating replicas.
	errs, busy := postResets(users*perUser, 6, func(i int) string { return rs[i%2].base }, email)
	for _, e := range errs {
		t.Error(e)
	}
	if !recv.WaitDelivered(users*perUser, 30*time.Second) {
		t.Fatalf("%d of %d messages delivered within 30s", recv.Delivered(), users*perUser)
	}
	time.Sleep(time.Second) // a duplicate would come now

	got := recv.Deliveries()
	perTo := map[string]int{}
	for id, hs := range got {
		if len(hs) != 1 {
			t.Errorf("webhook-id %s delivered %d times, want exactly once", id, len(hs))
		}
		perTo[hs[0].Payload.To]++
	}
	if len(got) != users*perUser || len(recv.Requests()) != users*perUser || len(recv.Rejected()) != 0 {
		t.Errorf("%d messages delivered in %d requests (%d refused), want %d in as many", len(got), len(recv.Requests()), len(recv.Rejected()), users*perUser)
	}
	for i := range users {
		if perTo[email(i)] != perUser {
			t.Errorf("%s got %d messages, want %d", email(i), perTo[email(i)], perUser)
		}
	}
	var byReplica []float64
	total := 0.0
	for _, p := range rs {
		n := mailMetric(t, p, "authsidecar_mail_delivered_total")
		byReplica = append(byReplica, n)
		total += n
	}
	if total != users*perUser {
		t.Errorf("delivered_total over the replicas: got %v (%v), want %d", total, byReplica, users*perUser)
	}
	t.Logf("%d messages, each delivered once; by replica: %v; 503 (intake full) answers retried: %d", len(got), byReplica, busy)
}
