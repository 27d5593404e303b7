package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/mailtest"
	"github.com/authsidecar/authsidecar/internal/pgtest"
)

// TestOutboxKill9: a process killed with kill -9 in the middle of a
// delivery (the receiver holds its send; the row is claimed) leaves the
// message to the next process within seconds, not after a 2-minute lease:
// to itself restarted on SQLite, to the other replica on PostgreSQL. The
// message is delivered once, and its attempts count the killed try.
func TestOutboxKill9(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			secret := mailtest.NewWebhookSecret(t)
			recv := mailtest.NewWebhookReceiver(t, secret)
			up := echoUpstream(t)
			mailCfg := fmt.Sprintf("email: { delivery: webhook, webhook: { url: %q } }\n", recv.URL)
			hookEnv := "EMAIL_WEBHOOK_SECRET=" + secret
			var start func() *process // the process that takes over
			var first *process
			var list func() string // outbox list
			if engine == "sqlite" {
				dir := t.TempDir()
				cfg, port := writeConfigFile(t, dir, "sidecar.yaml", fmt.Sprintf("upstream: %q\ndatabase: { driver: sqlite, path: %q }\n%s", up.URL, filepath.Join(dir, "auth.db"), mailCfg))
				start = func() *process { return startBinary(t, cfg, port, "AUTH_SECRET="+e2eSecret, hookEnv) }
				first = start()
				list = func() string { return mustCLI(t, "", "", argv(cfg, "outbox list")...) }
			} else {
				url := pgtest.URL(t)
				dir := t.TempDir()
				cfgA, portA := replicaConfig(t, dir, "a.yaml", up.URL, mailCfg)
				cfgB, portB := replicaConfig(t, dir, "b.yaml", up.URL, mailCfg)
				first = startBinary(t, cfgA, portA, append(pgEnv(url), hookEnv)...)
				start = func() *process { return startBinary(t, cfgB, portB, append(pgEnv(url), hookEnv)...) }
				list = func() string {
					return cliWithEnv(t, map[string]string{"DATABASE_URL": url}, argv(cfgB, "outbox list")...)
				}
			}
			signUp(t, first.instance, "ann@example.com", oldPassword)
			release := recv.Hold()
			defer release()
			if res, body := first.do(t, "POST", "/api/auth/request-password-reset", `{"email":"ann@example.com"}`); res.StatusCode != 200 {
				t.Fatalf("request-password-reset: %d %s", res.StatusCode, body)
			}
			for deadline := time.Now().Add(15 * time.Second); len(recv.Requests()) == 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the message never reached the receiver")
				}
			}
			held := recv.Requests()[0].ID
			if engine == "postgres" {
				start() // running before the kill: it notices by itself
			}
			first.kill()
			killed := time.Now()
			// Released before the receiver noticed its sender gone, the
			// held request would be answered 200 into a dead connection
			// and counted as the delivery (a loaded CI run saw that).
			for deadline := time.Now().Add(10 * time.Second); !recv.Requests()[0].Answered; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the receiver did not notice the killed sender leave within 10s")
				}
			}
			if h := recv.Requests()[0]; h.Status != 0 {
				t.Fatalf("the held request was answered %d, want 0 (its sender left)", h.Status)
			}
			release()
			if engine == "sqlite" {
				start()
			}
			if !recv.WaitDelivered(1, 60*time.Second) {
				t.Fatalf("the message held by the killed process was not delivered within 60s of the kill")
			}
			took := time.Since(killed)
			var delivered []mailtest.Hook
			for _, h := range recv.Requests() {
				if h.Status >= 200 && h.Status < 300 {
					delivered = append(delivered, h)
				}
			}
			if len(delivered) != 1 || delivered[0].ID != held {
				t.Errorf("delivered %d messages, want the held one (%s) once", len(delivered), held)
			}
			t.Logf("MEASURE outbox kill -9 (%s): the held message delivered by the %s %.1fs after the kill", engine, map[string]string{"sqlite": "restarted process", "postgres": "other replica"}[engine], took.Seconds())
			if took > 25*time.Second {
				t.Errorf("the message waited %v after the kill, want within seconds (lease 10s, poll 5s)", took)
			}
			// The receiver counts the delivery before the sender's
			// acknowledgement commits.
			rows := table(list())
			for deadline := time.Now().Add(5 * time.Second); len(rows) == 2 && rows[1][2] == "pending" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				rows = table(list())
			}
			if len(rows) != 2 || rows[1][2] != "delivered" || rows[1][3] != "2" {
				t.Errorf("outbox list: %q, want the message delivered at its second attempt (the killed one counted)", rows)
			}
		})
	}
}
