package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// TestBrowserRecovery walks account recovery in headless Chromium as a
// newcomer does on "authsidecar demo": the demo delivers mail to its log
// (email.delivery: log), and each link is read from there and opened in
// the browser.
func TestBrowserRecovery(t *testing.T) {
	browser := startBrowser(t)
	base, _, errOut := startDemo(t)
	demoLog := errOut.String

	t.Run("forgot password on the demo page: the link, a new password, the old one refused", func(t *testing.T) {
		const email = "forgot@example.com"
		const newPassword = "a-brand-new-horse-battery"
		ctx := newTab(t, browser, 90*time.Second)
		openDemo(t, ctx, base)
		if err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.ID("email"), email),
			chromedp.Click(chromedp.ID("signup")),
			chromedp.WaitReady(chromedp.CSS(`#status[data-state="in"]`)),
		); err != nil {
			t.Fatalf("sign up: %v", err)
		}
		// Another device's session, which the reset must end.
		otherDevice := demoSignIn(t, base, email, browserPassword)
		clickAndWaitText(t, ctx, "signout", "account-result", "Signed out")

		skip := len(mailsTo(demoLog(), "password_reset", email))
		clickAndWaitState(t, ctx, "forgot", "sent")
		link := waitMail(t, demoLog, "password_reset", email, skip)
		if !strings.HasPrefix(link, base+"/api/auth/reset-password/") || !strings.HasSuffix(link, "?callbackURL=%2F%3Fflow%3Dreset") {
			t.Fatalf("reset link %s: want %s/api/auth/reset-password/<token>?callbackURL=<the demo page>", link, base)
		}

		// The link redirects to the demo page with ?token=; the page takes
		// it out of the address bar and asks for the new password.
		if err := chromedp.Do(ctx,
			chromedp.Navigate(link),
			chromedp.WaitReady(chromedp.CSS(`#recovery-result[data-state="form"]`)),
		); err != nil {
			t.Fatalf("open the reset link: %v\n%s", err, demoLog())
		}
		if loc, _ := chromedp.Run(ctx, chromedp.Location()); loc != base+"/" {
			t.Errorf("address bar after the link: got %s, want %s/ (the token removed)", loc, base)
		}
		if err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.ID("new-password"), newPassword),
			chromedp.Click(chromedp.ID("reset")),
			chromedp.WaitReady(chromedp.CSS(`#recovery-result[data-state="changed"]`)),
		); err != nil {
			t.Fatalf("set the new password: %v", err)
		}
		if got := demoGetSession(t, base, otherDevice); got != "null" {
			t.Errorf("another device's session after the reset: get-session %s, want null", got)
		}

		// The page filled in the new password, and kept the address: signing
		// in works.
		for id, want := range map[string]string{"email": email, "password": newPassword} {
			if got, _ := chromedp.Run(ctx, chromedp.Value(chromedp.ID(id))); got != want {
				t.Errorf("#%s after the reset: got %q, want %q", id, got, want)
			}
		}
		clickAndWaitText(t, ctx, "signin", "account-result", "Signed in as "+email)
		// The old one is refused.
		clickAndWaitText(t, ctx, "signout", "account-result", "Signed out")
		if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("password"), browserPassword)); err != nil {
			t.Fatal(err)
		}
		clickAndWaitText(t, ctx, "signin", "account-result", "INVALID_EMAIL_OR_PASSWORD")

		// The used link is refused, on the page as by the server.
		if err := chromedp.Do(ctx,
			chromedp.Navigate(link),
			chromedp.WaitReady(chromedp.CSS(`#recovery-result[data-state="error"]`)),
		); err != nil {
			t.Fatalf("open the used link: %v", err)
		}
		if text, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("recovery-result"))); !strings.Contains(text, "INVALID_TOKEN") {
			t.Errorf("the used link: the page says %q, want INVALID_TOKEN", text)
		}
		if form, _ := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.ID("reset-form"), "hidden")); !form.Exists {
			t.Error("the used link shows the new-password form")
		}
	})

	t.Run("a link without redirectTo lands on the built-in page, which works without JavaScript", func(t *testing.T) {
		const email = "nojs@example.com"
		const newPassword = "a-script-free-horse-battery"
		demoPost(t, base, "/api/auth/sign-up/email", fmt.Sprintf(`{"name":"No JS","email":%q,"password":%q}`, email, browserPassword), 200)
		skip := len(mailsTo(demoLog(), "password_reset", email))
		demoPost(t, base, "/api/auth/request-password-reset", fmt.Sprintf(`{"email":%q}`, email), 200)
		link := waitMail(t, demoLog, "password_reset", email, skip)
		if !strings.HasSuffix(link, "?callbackURL=") {
			t.Fatalf("reset link without redirectTo: got %s, want an empty callbackURL", link)
		}

		ctx := newTab(t, browser, 60*time.Second)
		if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
			t.Fatal(err)
		}
		res, err := chromedp.Run(ctx, chromedp.NavigateResponse(link))
		if err != nil {
			t.Fatalf("open the link: %v", err)
		}
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		if res.Status != 200 || !strings.HasPrefix(loc, base+"/api/auth/reset-password-page?token=") {
			t.Fatalf("the link landed on %s (%d), want the built-in page with the token", loc, res.Status)
		}
		if err := chromedp.Do(ctx,
			chromedp.SendKeys(chromedp.ID("newPassword"), newPassword),
			chromedp.SendKeys(chromedp.ID("confirmPassword"), newPassword),
			chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
			chromedp.WaitReady(chromedp.ID("done")),
		); err != nil {
			t.Fatalf("the built-in form: %v", err)
		}
		demoPost(t, base, "/api/auth/sign-in/email", fmt.Sprintf(`{"email":%q,"password":%q}`, email, newPassword), 200)
		demoPost(t, base, "/api/auth/sign-in/email", fmt.Sprintf(`{"email":%q,"password":%q}`, email, browserPassword), 401)

		// Control: scripts really were off in this tab. The demo page, which
		// needs its script, never becomes ready here.
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.Sleep(time.Second)); err != nil {
			t.Fatal(err)
		}
		if ready, _ := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("body"), "data-ready")); ready.Exists {
			t.Fatal("the demo page's script ran: the tab had JavaScript, so the built-in page was not shown to work without it")
		}
	})

	t.Run("verify email on the demo page: the link signs in and shows the address verified", func(t *testing.T) {
		const email = "verify@example.com"
		ctx := newTab(t, browser, 90*time.Second)
		openDemo(t, ctx, base)
		if err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.ID("email"), email),
			chromedp.Click(chromedp.ID("signup")),
			chromedp.WaitReady(chromedp.CSS(`#status[data-state="in"][data-verified="false"]`)),
		); err != nil {
			t.Fatalf("sign up: %v", err)
		}
		skip := len(mailsTo(demoLog(), "email_verification", email))
		clickAndWaitState(t, ctx, "verify", "sent")
		link := waitMail(t, demoLog, "email_verification", email, skip)
		if !strings.HasPrefix(link, base+"/api/auth/verify-email?token=") || !strings.HasSuffix(link, "&callbackURL=%2F%3Fflow%3Dverified") {
			t.Fatalf("verification link %s: want %s/api/auth/verify-email?token=<token>&callbackURL=<the demo page>", link, base)
		}

		// Opened in another browser context (no cookie): the link alone
		// signs the user in.
		other := newTab(t, browser, 60*time.Second)
		if err := chromedp.Do(other,
			chromedp.Navigate(link),
			chromedp.WaitReady(chromedp.CSS(`#recovery-result[data-state="verified"]`)),
		); err != nil {
			t.Fatalf("open the verification link: %v\n%s", err, demoLog())
		}
		pill, _ := chromedp.Run(other, chromedp.Attributes(chromedp.ID("status")))
		if pill["data-state"] != "in" || pill["data-verified"] != "true" {
			t.Errorf("after the link: status %v, want signed in and verified", pill)
		}
		token := eval[string](t, other, `return localStorage.getItem("authToken");`)
		var claims struct {
			Email         string
			EmailVerified bool
		}
		if raw, err := base64.RawURLEncoding.DecodeString(strings.Split(token+"..", ".")[1]); err != nil || json.Unmarshal(raw, &claims) != nil ||
			claims.Email != email || !claims.EmailVerified {
			t.Errorf("the JWT after the link: %+v, want %s with emailVerified true", claims, email)
		}

		// Used once: opening it again is refused.
		if err := chromedp.Do(other,
			chromedp.Navigate(link),
			chromedp.WaitReady(chromedp.CSS(`#recovery-result[data-state="error"]`)),
		); err != nil {
			t.Fatalf("open the used link: %v", err)
		}
	})

	t.Run("the served client's verifyEmail in the page, with and without callbackURL", func(t *testing.T) {
		// The mail is asked for without a session, as from a sign-in page.
		links := map[string]string{}
		for _, email := range []string{"plain@example.com", "callback@example.com"} {
			demoPost(t, base, "/api/auth/sign-up/email", fmt.Sprintf(`{"name":"V","email":%q,"password":%q}`, email, browserPassword), 200)
			skip := len(mailsTo(demoLog(), "email_verification", email))
			demoPost(t, base, "/api/auth/send-verification-email", fmt.Sprintf(`{"email":%q,"callbackURL":"/?flow=verified"}`, email), 200)
			links[email] = waitMail(t, demoLog, "email_verification", email, skip)
		}
		tokenOf := func(link string) string {
			u, err := url.Parse(link)
			if err != nil || u.Query().Get("token") == "" {
				t.Fatalf("no token in %s", link)
			}
			return u.Query().Get("token")
		}
		type outcome struct {
			Code, Email, Stored string
			Verified            bool
		}
		// call runs verifyEmail in a fresh browser context on the demo's
		// origin, with the client the sidecar serves.
		call := func(input string) outcome {
			ctx := newTab(t, browser, 60*time.Second)
			openDemo(t, ctx, base)
			return eval[outcome](t, ctx, `
				const { createAuthClient } = await import("/api/auth/client.js");
				const auth = createAuthClient();
				try {
					const s = await auth.verifyEmail(`+input+`);
					return { email: s?.user.email ?? "", verified: s?.user.emailVerified ?? false, stored: localStorage.getItem("authToken") ?? "" };
				} catch (err) {
					return { code: err.code };
				}`)
		}
		for _, tc := range []struct {
			name, input string
			want        outcome
		}{
			{"bad token", `{ token: "not-a-token" }`, outcome{Code: "INVALID_TOKEN"}},
			{"bad token, callbackURL", `{ token: "not-a-token", callbackURL: "/?flow=verified" }`, outcome{Code: "INVALID_TOKEN"}},
			{"mailed token", fmt.Sprintf(`{ token: %q }`, tokenOf(links["plain@example.com"])), outcome{Email: "plain@example.com", Verified: true}},
			{"mailed token, callbackURL", fmt.Sprintf(`{ token: %q, callbackURL: "/?flow=verified" }`, tokenOf(links["callback@example.com"])), outcome{Email: "callback@example.com", Verified: true}},
			{"spent token", fmt.Sprintf(`{ token: %q }`, tokenOf(links["plain@example.com"])), outcome{Code: "INVALID_TOKEN"}},
			{"spent token, callbackURL", fmt.Sprintf(`{ token: %q, callbackURL: "/?flow=verified" }`, tokenOf(links["callback@example.com"])), outcome{Code: "INVALID_TOKEN"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got := call(tc.input)
				if signedIn := tc.want.Email != ""; signedIn != (got.Stored != "") {
					t.Errorf("stored JWT %q, want one exactly when the link signs in", got.Stored)
				} else if signedIn {
					jwtSubject(t, got.Stored)
				}
				got.Stored = ""
				if got != tc.want {
					t.Errorf("got %+v, want %+v", got, tc.want)
				}
			})
		}
	})
}

// openDemo loads the demo page and waits for its script.
func openDemo(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitReady(chromedp.CSS("body[data-ready]"))); err != nil {
		t.Fatalf("open the demo page: %v", err)
	}
}

// clickAndWaitState clicks a button of card 5 and waits for the outcome.
func clickAndWaitState(t *testing.T, ctx context.Context, button, state string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.ID(button)),
		chromedp.WaitReady(chromedp.CSS(fmt.Sprintf(`#recovery-result[data-state=%q]`, state))),
	); err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("recovery-result")))
		t.Fatalf("click #%s: %v (card 5 says %q)", button, err, text)
	}
}

// clickAndWaitText clicks a button and waits until the element with id
// says text.
func clickAndWaitText(t *testing.T, ctx context.Context, button, id, text string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.ID(button)),
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.getElementById(%q).textContent.includes(%q)`, id, text),
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second)),
	); err != nil {
		got, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID(id)))
		t.Fatalf("click #%s: %v (#%s says %q, want %q)", button, err, id, got, text)
	}
}

// demoPost posts JSON to the demo sidecar and checks the status.
func demoPost(t *testing.T, base, path, body string, want int) *http.Response {
	t.Helper()
	res, err := http.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != want {
		t.Fatalf("POST %s: got %d %s, want %d", path, res.StatusCode, b, want)
	}
	return res
}

// demoSignIn signs in over HTTP, as another device, and returns its
// session cookie.
func demoSignIn(t *testing.T, base, email, password string) *http.Cookie {
	t.Helper()
	res := demoPost(t, base, "/api/auth/sign-in/email", fmt.Sprintf(`{"email":%q,"password":%q}`, email, password), 200)
	if len(res.Cookies()) != 1 {
		t.Fatalf("sign-in set %d cookies, want 1", len(res.Cookies()))
	}
	return res.Cookies()[0]
}

// demoGetSession is get-session's body with the cookie.
func demoGetSession(t *testing.T, base string, c *http.Cookie) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/auth/get-session", nil)
	req.AddCookie(c)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return strings.TrimSpace(string(b))
}
