package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestOutboxCommands: a message that dies (the receiver refuses it and
// email.max_attempts is 1) shows in "outbox list dead" without its link;
// "outbox retry" replaces it with a new link for the same user, which the
// running binary delivers once the receiver accepts, and which works; a
// delivered message is not retried.
func TestOutboxCommands(t *testing.T) {
	t.Parallel()
	var accept atomic.Bool
	var mu sync.Mutex
	var got []map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !accept.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("webhook body %q: %v", body, err)
		}
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	up := echoUpstream(t)
	dir := t.TempDir()
	cfgPath, port := writeConfigFile(t, dir, "outbox.yaml", fmt.Sprintf(`base_url: "http://app.example.test"
upstream: %q
database: { driver: sqlite, path: %q }
email: { delivery: webhook, max_attempts: 1, webhook: { url: %q } }
`, up.URL, dir+"/auth.db", hook.URL))
	secret := "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	p := startBinary(t, cfgPath, port, "AUTH_SECRET="+e2eSecret, "EMAIL_WEBHOOK_SECRET="+secret)
	signUp(t, p.instance, "ann@example.com", "correct-horse-battery")
	res, body := p.do(t, "POST", "/api/auth/request-password-reset", `{"email":"ann@example.com"}`)
	if res.StatusCode != 200 {
		t.Fatalf("request-password-reset: %d %s", res.StatusCode, body)
	}

	list := func(state string) [][]string {
		cmd := argv(cfgPath, "outbox list")
		if state != "" {
			cmd = append(cmd, state)
		}
		out := mustCLI(t, "", "", cmd...)
		if strings.Contains(out, "reset-password/") {
			t.Fatalf("outbox list shows a link:\n%s", out)
		}
		rows := table(out)
		if out == "no messages\n" {
			return nil
		}
		if strings.Join(rows[0], " ") != "ID TYPE STATE ATTEMPTS CREATED NEXT ATTEMPT LAST ERROR" {
			t.Fatalf("outbox list header: %q", rows[0])
		}
		return rows[1:]
	}
	var dead [][]string
	for deadline := time.Now().Add(15 * time.Second); len(dead) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no dead message after 15s:\n%s", mustCLI(t, "", "", argv(cfgPath, "outbox list")...))
		}
		dead = list("dead")
	}
	if len(dead) != 1 || dead[0][1] != "password_reset" || dead[0][3] != "1" || !strings.Contains(dead[0][len(dead[0])-1], "503") {
		t.Fatalf("dead rows: %q, want one password_reset after 1 attempt with the 503 as last error", dead)
	}
	deadID := dead[0][0]

	// Pending retries need the secret (a dead one is re-sealed).
	if _, _, err := cli(t, "", "", argv(cfgPath, "outbox retry", deadID)...); err == nil || !strings.Contains(err.Error(), "AUTH_SECRET") {
		t.Errorf("retry without the secret: %v", err)
	}
	if _, _, err := cli(t, e2eSecret, "", argv(cfgPath, "outbox retry", "msg_nope")...); err == nil || !strings.Contains(err.Error(), "no message msg_nope") {
		t.Errorf("retry of an unknown id: %v", err)
	}
	accept.Store(true)
	out := mustCLI(t, e2eSecret, "", argv(cfgPath, "outbox retry", deadID)...)
	m := regexp.MustCompile(`queued a new password_reset link for ann@example.com as message (msg_\S+) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("outbox retry: %q", out)
	}
	newID := m[1]
	// The running sidecar finds it at its next poll.
	var link string
	for deadline := time.Now().Add(15 * time.Second); link == ""; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the re-queued message was not delivered:\n%s", mustCLI(t, "", "", argv(cfgPath, "outbox list")...))
		}
		mu.Lock()
		if len(got) == 1 {
			link, _ = got[0]["url"].(string)
		}
		mu.Unlock()
	}
	tok := regexp.MustCompile(`/reset-password/([A-Za-z0-9_-]{43})\?`).FindStringSubmatch(link)
	if tok == nil {
		t.Fatalf("delivered link %q", link)
	}
	res, body = p.do(t, "POST", "/api/auth/reset-password", fmt.Sprintf(`{"newPassword":"new-horse-battery","token":%q}`, tok[1]))
	if res.StatusCode != 200 {
		t.Fatalf("reset with the re-queued link: %d %s", res.StatusCode, body)
	}
	rows := list("")
	states, attempts := map[string]string{}, map[string]string{}
	for _, r := range rows {
		states[r[0]], attempts[r[0]] = r[2], r[3]
	}
	if states[deadID] != "dead" || states[newID] != "delivered" || len(rows) != 2 {
		t.Errorf("outbox after the retry: %q, want %s dead and %s delivered", rows, deadID, newID)
	}
	// The count the log reports ("mail delivered" attempt=1), not 0.
	if attempts[newID] != "1" {
		t.Errorf("attempts of the message delivered at its first attempt: got %q, want 1", attempts[newID])
	}
	if _, _, err := cli(t, e2eSecret, "", argv(cfgPath, "outbox retry", newID)...); err == nil || !strings.Contains(err.Error(), "was delivered") {
		t.Errorf("retry of a delivered message: %v", err)
	}
}
