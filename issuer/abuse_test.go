package issuer_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authsidecar/authsidecar/issuer"
)

// The limits and trust boundaries of issue 25, at the issuer: each test
// here failed before its fix.

// testClient names a request's client from X-Test-Client, as the proxy's
// ClientIP names it from a trusted X-Forwarded-For.
func testClient(o *issuer.Options) {
	o.ClientIP = func(r *http.Request) string { return r.Header.Get("X-Test-Client") }
}

func changePassword(e *env, cookie, ip, current string) resp {
	e.t.Helper()
	return e.postJSON("/api/auth/change-password", map[string]any{"currentPassword": current, "newPassword": "a-new-password-9"},
		"Cookie", cookie, "Origin", "http://localhost:8080", "X-Test-Client", ip)
}

// TestPasswordCheckLimits: change-password (checkPassword) is limited per
// user, from any address, and per client IP, across users: 429 with
// Retry-After before any hashing, so even the right password waits; the
// budgets refill with time.
func TestPasswordCheckLimits(t *testing.T) {
	e := newEnv(t, testClient, func(o *issuer.Options) {
		o.PasswordCheckPerUser = issuer.Rate{N: 3, Per: time.Minute}
		o.PasswordCheckPerIP = issuer.Rate{N: 5, Per: time.Minute}
	})
	ann, _ := e.signUp("ann@example.com", pw)
	var got []int
	for i := range 3 {
		got = append(got, changePassword(e, ann, fmt.Sprintf("192.0.2.%d", i+1), "wrong-guess-1").status)
	}
	r := changePassword(e, ann, "192.0.2.9", pw)
	got = append(got, r.status)
	if fmt.Sprint(got) != "[400 400 400 429]" || r.header.Get("Retry-After") == "" || r.header.Get("X-Retry-After") == "" || r.code(t) != "TOO_MANY_REQUESTS" {
		t.Fatalf("three wrong guesses from three addresses, then the right password: got %v %s (Retry-After %q), want [400 400 400 429] with Retry-After",
			got, r.body, r.header.Get("Retry-After"))
	}
	if r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "ann@example.com", "password": pw}); r.status != 200 {
		t.Fatalf("the refused change went through: sign-in with the old password got %d", r.status)
	}
	e.clock.Add(time.Minute)
	if r := changePassword(e, ann, "192.0.2.9", pw); r.status != 200 {
		t.Errorf("a minute later, the right password: got %d %s, want 200", r.status, r.body)
	}

	// Per IP: five tries from one address, whichever accounts; the sixth
	// is refused, another address is not.
	var cookies []string
	for i := range 3 {
		c, _ := e.signUp(fmt.Sprintf("user%d@example.com", i), pw)
		cookies = append(cookies, c)
	}
	got = got[:0]
	for i := range 6 {
		got = append(got, changePassword(e, cookies[i%3], "203.0.113.5", "wrong-guess-2").status)
	}
	got = append(got, changePassword(e, cookies[0], "203.0.113.6", "wrong-guess-3").status)
	if fmt.Sprint(got) != "[400 400 400 400 400 429 400]" {
		t.Errorf("six tries from one address over three accounts, then one from another: got %v, want [400 400 400 400 400 429 400]", got)
	}
}

// TestChangePasswordFloodFairShare: one account floods change-password
// (limits off, so every request reaches the hasher) from eighty
// connections while other users sign in from another address: every one
// of their sign-ins succeeds. Before the fair share they got 503: the
// flood held the slot and the whole queue.
func TestChangePasswordFloodFairShare(t *testing.T) {
	e := newEnv(t, testClient, func(o *issuer.Options) {
		o.PasswordCost = issuer.ScryptParams{N: 1 << 12, R: 8, P: 1} // a few ms: the flood fills the queue
		o.PasswordHashConcurrency = 1
	})
	mallory, _ := e.signUp("mallory@example.com", pw)
	var victims []string
	for i := range 5 {
		victims = append(victims, fmt.Sprintf("victim%d@example.com", i))
		e.signUp(victims[i], pw)
	}
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		wg       sync.WaitGroup
	)
	stop := make(chan struct{})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 80}}
	for range 80 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", e.srv.URL+"/api/auth/change-password", strings.NewReader(`{"currentPassword":"wrong-guess-1","newPassword":"a-new-password-9"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Cookie", mallory)
				req.Header.Set("Origin", "http://localhost:8080")
				req.Header.Set("X-Test-Client", "198.51.100.7")
				res, err := client.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				mu.Lock()
				statuses[res.StatusCode]++
				mu.Unlock()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	// The flood has filled the queue once its own requests are refused.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		busy := statuses[503]
		mu.Unlock()
		if busy > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the flood never filled the hashing queue: %v", statuses)
		}
	}
	var got []int
	for range 2 {
		for _, v := range victims {
			got = append(got, e.postJSON("/api/auth/sign-in/email", map[string]any{"email": v, "password": pw}, "X-Test-Client", "203.0.113.9").status)
		}
	}
	mu.Lock()
	t.Logf("flood statuses %v; victims %v", statuses, got)
	mu.Unlock()
	for _, s := range got {
		if s != 200 {
			t.Fatalf("sign-ins of other users under the flood: got %v, want every one 200", got)
		}
	}
}

// TestVerifyEmailSignIn: by default a verification link verifies and
// signs nobody in; with SignInAfterVerification it signs in a browser with
// no session, re-sets the cookie of one signed in as the same user, and
// never replaces another user's session (the login CSRF: a link for the
// sender's address opened by a victim).
func TestVerifyEmailSignIn(t *testing.T) {
	tests := []struct {
		name    string
		on      bool
		browser string // "" (no session), "owner" or "other"
		want    string // "none": no cookie set; "new": a new session; "same": the owner's cookie again
	}{
		{"off, no session", false, "", "none"},
		{"off, the owner's session", false, "owner", "none"},
		{"off, another user's session", false, "other", "none"},
		{"on, no session", true, "", "new"},
		{"on, the owner's session", true, "owner", "same"},
		{"on, another user's session", true, "other", "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, rec := newRecoveryEnv(t, func(o *issuer.Options) { o.Recovery.SignInAfterVerification = tt.on })
			owner, _ := e.signUp("owner@example.com", pw)
			other, _ := e.signUp("other@example.com", pw)
			if r := e.postJSON("/api/auth/send-verification-email", map[string]any{"email": "owner@example.com", "callbackURL": "/welcome"}); r.status != 200 {
				t.Fatalf("send-verification-email: got %d %s", r.status, r.body)
			}
			e.iss.Wait()
			tok, _ := verifyToken(t, rec, "owner@example.com")
			var hdr []string
			switch tt.browser {
			case "owner":
				hdr = []string{"Cookie", owner}
			case "other":
				hdr = []string{"Cookie", other}
			}
			r := e.do("GET", "/api/auth/verify-email?token="+tok+"&callbackURL=/welcome", "", "", hdr...)
			if r.status != 302 || r.header.Get("Location") != "/welcome" {
				t.Fatalf("verify-email: got %d %q, want 302 to /welcome", r.status, r.header.Get("Location"))
			}
			c := r.cookie("auth.session_token")
			got := "none"
			switch {
			case c != nil && c.Name+"="+c.Value == owner:
				got = "same"
			case c != nil:
				got = "new"
				s := e.getSession(c.Name + "=" + c.Value).json(t)
				if u, _ := s["user"].(map[string]any); u["email"] != "owner@example.com" {
					t.Errorf("the new session is %v's, want the owner's", u)
				}
			}
			if got != tt.want {
				t.Errorf("session cookie: got %s, want %s", got, tt.want)
			}
			// The address is verified whatever happened to sessions, and
			// the other user is still signed in as themselves.
			if u, _ := e.getSession(owner).json(t)["user"].(map[string]any); u["emailVerified"] != true {
				t.Errorf("owner after the link: %v, want emailVerified true", u)
			}
			if u, _ := e.getSession(other).json(t)["user"].(map[string]any); u["email"] != "other@example.com" {
				t.Errorf("the other user's session after the link: %v", u)
			}
		})
	}
}

// TestIPv6PrefixLimits: a per-IP limit counts every address of an IPv6
// /64 (or IPv6Prefix) as one client, IPv4 addresses one by one, and an
// IPv4-mapped IPv6 address as its IPv4 address.
func TestIPv6PrefixLimits(t *testing.T) {
	tests := []struct {
		name   string
		prefix int
		ips    []string
		want   string
	}{
		{"one /64, default prefix", 0, []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::3", "2001:db8:1:2:ffff:ffff:ffff:ffff"}, "[401 401 401 429]"},
		{"neighbouring /64s", 0, []string{"2001:db8:1:2::1", "2001:db8:1:3::1", "2001:db8:1:4::1", "2001:db8:1:5::1"}, "[401 401 401 401]"},
		{"one /48 at prefix 48", 48, []string{"2001:db8:1:2::1", "2001:db8:1:3::1", "2001:db8:1:4::1", "2001:db8:1:5::1"}, "[401 401 401 429]"},
		{"per address at prefix 128", 128, []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2::3", "2001:db8:1:2::4"}, "[401 401 401 401]"},
		{"IPv4 per address", 0, []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"}, "[401 401 401 401]"},
		{"IPv4 and IPv4-mapped IPv6 are one", 0, []string{"192.0.2.1", "::ffff:192.0.2.1", "192.0.2.1", "::ffff:c000:201"}, "[401 401 401 429]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, testClient, func(o *issuer.Options) {
				o.SignInPerIP = issuer.Rate{N: 3, Per: time.Hour}
				o.IPv6Prefix = tt.prefix
			})
			var got []int
			for i, ip := range tt.ips {
				got = append(got, e.postJSON("/api/auth/sign-in/email", map[string]any{"email": fmt.Sprintf("u%d@example.com", i), "password": "wrong-password"}, "X-Test-Client", ip).status)
			}
			if fmt.Sprint(got) != tt.want {
				t.Errorf("got %v, want %s", got, tt.want)
			}
		})
	}
	if _, err := issuer.New(t.Context(), issuer.Options{Store: openDB(t, t.TempDir()+"/x.db"), Secret: []byte(testSecret), Limits: issuer.Limits{IPv6Prefix: 129}}); err == nil {
		t.Error("IPv6Prefix 129: no error")
	}
}

// TestReloadKeepsLimiters: a reload that leaves a per-IP limit alone keeps
// its buckets (a client refused before is refused after); one that
// changes it, or the IPv6 prefix, starts it afresh.
func TestReloadKeepsLimiters(t *testing.T) {
	limits := issuer.Limits{SignInPerIP: issuer.Rate{N: 2, Per: time.Hour}, TokenPerIP: issuer.Rate{N: 1, Per: time.Hour}}
	e := newEnv(t, func(o *issuer.Options) { o.Limits = limits })
	signIn := func(h http.Handler) int {
		srv := httptest.NewServer(h)
		defer srv.Close()
		res, err := http.Post(srv.URL+"/api/auth/sign-in/email", "application/json", strings.NewReader(`{"email":"x@example.com","password":"wrong-password"}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	got := []int{signIn(e.iss), signIn(e.iss), signIn(e.iss)}
	same, err := e.iss.Reload(issuer.ReloadOptions{Limits: limits, TrustedOrigins: []string{"https://new.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, signIn(same))
	changed := limits
	changed.SignInPerIP.N = 3
	more, err := same.Reload(issuer.ReloadOptions{Limits: changed})
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, signIn(more))
	v6 := limits
	v6.IPv6Prefix = 56
	other, err := same.Reload(issuer.ReloadOptions{Limits: v6})
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, signIn(other))
	if fmt.Sprint(got) != "[401 401 429 429 401 401]" {
		t.Errorf("two sign-ins, a third, then after reloads (same limits; a changed rate; a changed IPv6 prefix): got %v, want [401 401 429 429 401 401]", got)
	}
}

// TestBodyReadTimeout: a body that does not arrive within the deadline is
// answered 408 with JSON and the connection closed; a body read in time
// clears the deadline, so a handler that then works longer (hashing a
// password) is not cut short.
func TestBodyReadTimeout(t *testing.T) {
	e := newEnv(t, func(o *issuer.Options) { o.BodyReadTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "POST /api/auth/sign-in/email HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"email\":")
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("a body that never arrives: no answer (%v)", err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 408 || !strings.Contains(string(b), `"code":"REQUEST_TIMEOUT"`) {
		t.Errorf("a body that never arrives: got %d %s, want 408 REQUEST_TIMEOUT", res.StatusCode, b)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the 408: read %v, want the connection closed", err)
	}

	// A deadline far shorter than a hash: the body is read in time, the
	// rest of the request is not bounded by it.
	slow := newEnv(t, func(o *issuer.Options) {
		o.BodyReadTimeout = 20 * time.Millisecond
		o.PasswordCost = issuer.ScryptParams{N: 1 << 14, R: 8, P: 1} // 16 MiB, tens of ms
	})
	slow.signUp("ann@example.com", pw)
	for i := range 3 {
		if r := slow.postJSON("/api/auth/sign-in/email", map[string]any{"email": "ann@example.com", "password": pw}); r.status != 200 {
			t.Fatalf("sign-in %d with a 20ms body deadline: got %d %s, want 200", i, r.status, r.body)
		}
	}
}

// TestCallbackBodyReadTimeout: the form_post callback (a POST any site
// may send, answered before the other routes' checks) reads its body
// within BodyReadTimeout too, like every /api/auth body: a body that
// never arrives gets an answer and the connection is closed, where it
// used to hold its goroutine for as long as the client kept it open.
func TestCallbackBodyReadTimeout(t *testing.T) {
	e := newEnv(t, func(o *issuer.Options) { o.BodyReadTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "POST /api/auth/callback/google HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nstate=")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	if _, err := http.ReadResponse(br, nil); err != nil {
		t.Fatalf("a callback body that never arrives: no answer (%v)", err)
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Errorf("after the answer: read %v, want the connection closed", err)
	}
}

// TestSignInLockedOut: the per-email limit refuses the right password
// too; the client sees the ordinary 429, the metrics a result of its own.
func TestSignInLockedOut(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(o *issuer.Options) {
		o.SignInPerEmail = issuer.Rate{N: 2, Per: time.Minute}
		o.Registerer = reg
	})
	e.signUp("ann@example.com", pw)
	var got []int
	for _, p := range []string{"wrong-password", "wrong-password", pw} {
		r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": "ann@example.com", "password": p})
		got = append(got, r.status)
		if r.status == 429 && (r.code(t) != "TOO_MANY_REQUESTS" || r.header.Get("Retry-After") == "") {
			t.Errorf("locked out: got %s (Retry-After %q), want the ordinary 429", r.body, r.header.Get("Retry-After"))
		}
	}
	if fmt.Sprint(got) != "[401 401 429]" {
		t.Fatalf("two wrong passwords, then the right one: got %v, want [401 401 429]", got)
	}
	want := map[string]float64{"locked_out": 1, "invalid_credentials": 2, "rate_limited": 0}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "authsidecar_signins_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			seen[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	for label, v := range want {
		if got, ok := seen[label]; !ok || got != v {
			t.Errorf("authsidecar_signins_total{result=%q}: got %v (present %t), want %v", label, got, ok, v)
		}
	}
}
