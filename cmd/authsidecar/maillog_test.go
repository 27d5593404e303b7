package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// With email.delivery: log the sidecar "sends" a message by writing its
// link to the log: a developer on the demo follows it from there, and so do
// these tests. Nothing here imitates the sender: the lines are the ones the
// real worker and mail.LogSender wrote.

// mailed is one message as the log sender wrote it.
type mailed struct {
	Kind string `json:"type"` // "password_reset" | "email_verification"
	To   string `json:"to"`
	URL  string `json:"url"`
}

// textAttr is one key=value of a log/slog text line; values with spaces,
// quotes or "=" (every link has one) are written quoted.
var textAttr = regexp.MustCompile(`(?:^| )([^ ="]+)=("(?:[^"\\]|\\.)*"|[^ ]*)`)

// mailsInLog returns the messages in a sidecar log, in order, whether the
// log is JSON (serve's default in these tests) or text (the demo's).
func mailsInLog(log string) []mailed {
	var out []mailed
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, "{") {
			var l struct {
				Msg string `json:"msg"`
				mailed
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "mail" {
				out = append(out, l.mailed)
			}
			continue
		}
		attrs := map[string]string{}
		for _, a := range textAttr.FindAllStringSubmatch(line, -1) {
			v := a[2]
			if strings.HasPrefix(v, `"`) {
				var err error
				if v, err = strconv.Unquote(v); err != nil {
					continue
				}
			}
			attrs[a[1]] = v
		}
		if attrs["msg"] == "mail" {
			out = append(out, mailed{Kind: attrs["type"], To: attrs["to"], URL: attrs["url"]})
		}
	}
	return out
}

// mailsTo is the messages of kind sent to addr.
func mailsTo(log, kind, addr string) []mailed {
	var out []mailed
	for _, m := range mailsInLog(log) {
		if m.Kind == kind && m.To == addr {
			out = append(out, m)
		}
	}
	return out
}

// waitMail waits for a message of kind to addr after the first skip such
// messages in log() (delivery is asynchronous, the log is flushed in
// batches) and returns its link.
func waitMail(t *testing.T, log func() string, kind, addr string, skip int) string {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got := mailsTo(log(), kind, addr); len(got) > skip {
			return got[skip].URL
		}
	}
	t.Fatalf("no %s mail to %s in the log within 15s (after %d):\n%s", kind, addr, skip, log())
	return ""
}

func TestMailsInLog(t *testing.T) {
	const link = "http://127.0.0.1:8080/api/auth/reset-password/abc_DEF-123?callbackURL=%2F%3Fflow%3Dreset"
	cases := []struct {
		name, log string
		want      []mailed
	}{
		{"json", `{"time":"t","level":"INFO","msg":"request","path":"/x"}
{"time":"t","level":"INFO","msg":"mail","type":"password_reset","to":"ann@example.com","url":"` + link + `","id":"msg_1"}
`, []mailed{{"password_reset", "ann@example.com", link}}},
		{"text, quoted url", `time=t level=INFO msg=request path=/x
time=t level=INFO msg=mail type=email_verification to=ann@example.com url="` + link + `" id=msg_2
time=t level=INFO msg=mail type=password_reset to="o'neil+x@example.com" url=http://h/p id=msg_3
`, []mailed{{"email_verification", "ann@example.com", link}, {"password_reset", "o'neil+x@example.com", "http://h/p"}}},
		{"text, a look-alike is not a mail", `time=t level=INFO msg=mailbox url=http://h/p
time=t level=INFO msg="request" note=" msg=mail url=x"
`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mailsInLog(tc.log)
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("mail %d: got %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// mailbox serves the mails in log() as the Better Auth reference server's
// GET /__mail does ([{kind, to, url}], kind "reset-password" or
// "verify-email"), so client-check.mjs reads links the same way from both.
func mailbox(t *testing.T, log func() string) string {
	t.Helper()
	kinds := map[string]string{"password_reset": "reset-password", "email_verification": "verify-email"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := []map[string]string{}
		for _, m := range mailsInLog(log()) {
			out = append(out, map[string]string{"kind": kinds[m.Kind], "to": m.To, "url": m.URL})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/__mail"
}
