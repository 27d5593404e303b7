package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The attacks of issue 25, tried against the built binary as an attacker
// on the network would: each subtest starts its own process, so one
// attack's limits never help another's.

// abuseBinary starts the built binary with extra YAML, behind a trusted
// proxy (127.0.0.1: the test names its clients with X-Forwarded-For),
// with mail written to the log and a recording upstream.
func abuseBinary(t *testing.T, extra string, env ...string) (*process, *headerUpstream) {
	t.Helper()
	up := newHeaderUpstream(t)
	dir := t.TempDir()
	port := freePort(t)
	// A "metrics: { ... }" line in extra joins the listener's own.
	metrics := ""
	if m, ok := strings.CutPrefix(extra, "metrics: { "); ok {
		metrics, extra, _ = strings.Cut(m, " }\n")
		metrics = ", " + metrics
	}
	cfg := fmt.Sprintf(`listen: "127.0.0.1:%d"
base_url: "http://127.0.0.1:%d"
upstream: %q
database: { driver: sqlite, path: %q }
metrics: { listen: "127.0.0.1:%d"%s }
log: { format: json, level: info }
email: { delivery: log }
%s`, port, port, up.srv.URL, filepath.Join(dir, "auth.db"), freePort(t), metrics, extra)
	if !strings.Contains(extra, "proxy:") {
		cfg += "proxy: { trusted_proxies: [\"127.0.0.1\"] }\n"
	}
	path := filepath.Join(dir, "sidecar.yaml")
	writeFile(t, path, cfg)
	return startBinary(t, path, port, append([]string{"AUTH_SECRET=" + e2eSecret}, env...)...), up
}

// headerUpstream records the headers of every request it gets.
type headerUpstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []http.Header
	body []string
}

func newHeaderUpstream(t *testing.T) *headerUpstream {
	u := &headerUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, r.Header.Clone())
		u.body = append(u.body, string(b))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *headerUpstream) last() (http.Header, string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		return nil, ""
	}
	return u.seen[len(u.seen)-1], u.body[len(u.body)-1]
}

// from is the header pair that makes the trusted proxy name ip as the client.
func from(ip string) []string { return []string{"X-Forwarded-For", ip} }

// signUpFrom creates a user from ip and returns its session cookie.
func signUpFrom(t *testing.T, s *instance, ip, email string) string {
	t.Helper()
	res, body := s.do(t, "POST", "/api/auth/sign-up/email", fmt.Sprintf(`{"name":"N","email":%q,"password":"correct-horse-battery"}`, email), from(ip)...)
	if res.StatusCode != 200 || len(res.Cookies()) != 1 {
		t.Fatalf("sign-up %s: got %d %s", email, res.StatusCode, body)
	}
	return res.Cookies()[0].Name + "=" + res.Cookies()[0].Value
}

// sessionCookie returns the session cookie a response sets, if any.
func sessionCookie(res *http.Response) *http.Cookie {
	for _, c := range res.Cookies() {
		if strings.HasSuffix(c.Name, "auth.session_token") {
			return c
		}
	}
	return nil
}

// noFollow GETs url as a browser's top-level navigation would, without
// following the redirect it answers with.
func noFollow(t *testing.T, url string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// floodResult is what a change-password flood got, by status.
type floodResult struct {
	mu         sync.Mutex
	statuses   map[int]int
	retryAfter bool // a 429 carried Retry-After
}

// changePasswordFlood posts wrong current passwords with cookie from ip on
// conns connections until stop is closed.
func changePasswordFlood(base, cookie, ip string, conns int, stop chan struct{}) (*floodResult, *sync.WaitGroup) {
	fr := &floodResult{statuses: map[int]int{}}
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}, Timeout: 30 * time.Second}
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", base+"/api/auth/change-password", strings.NewReader(`{"currentPassword":"a-wrong-guess-1","newPassword":"another-password-2"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Cookie", cookie)
				req.Header.Set("Origin", base)
				req.Header.Set("X-Forwarded-For", ip)
				res, err := client.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				fr.mu.Lock()
				fr.statuses[res.StatusCode]++
				if res.StatusCode == 429 && res.Header.Get("Retry-After") != "" {
					fr.retryAfter = true
				}
				fr.mu.Unlock()
			}
		}()
	}
	return fr, &wg
}

// signInsUnderFlood floods change-password from one account while five
// other users sign in three times each from another address, and returns
// the victims' statuses and what the flood got.
func signInsUnderFlood(t *testing.T, p *process) (victims []int, flood map[int]int, retryAfter bool) {
	t.Helper()
	mallory := signUpFrom(t, p.instance, "198.51.100.7", "mallory@example.com")
	var emails []string
	for i := range 5 {
		emails = append(emails, fmt.Sprintf("victim%d@example.com", i))
		signUpFrom(t, p.instance, "203.0.113.9", emails[i])
	}
	stop := make(chan struct{})
	fr, wg := changePasswordFlood(p.base, mallory, "198.51.100.7", 80, stop)
	time.Sleep(time.Second) // the flood fills the hashing slots and their queue
	for range 3 {
		for _, email := range emails {
			res, _ := p.do(t, "POST", "/api/auth/sign-in/email", fmt.Sprintf(`{"email":%q,"password":"correct-horse-battery"}`, email), from("203.0.113.9")...)
			victims = append(victims, res.StatusCode)
		}
	}
	close(stop)
	wg.Wait()
	return victims, fr.statuses, fr.retryAfter
}

func successRate(statuses []int) (ok int) {
	for _, s := range statuses {
		if s == 200 {
			ok++
		}
	}
	return ok
}

func TestAbuseBinary(t *testing.T) {
	t.Run("a change-password flood from one account does not lock others out of signing in", func(t *testing.T) {
		p, _ := abuseBinary(t, "")
		victims, flood, retryAfter := signInsUnderFlood(t, p)
		t.Logf("MEASURE sign-in success under a change-password flood (default limits): %d/%d; flood statuses %v", successRate(victims), len(victims), flood)
		if successRate(victims) != len(victims) {
			t.Errorf("victims' sign-ins: got %v, want every one 200", victims)
		}
		if flood[429] == 0 || !retryAfter {
			t.Errorf("flood statuses %v (Retry-After on 429: %v): want change-password limited with 429 and Retry-After", flood, retryAfter)
		}
	})

	t.Run("with the change-password limits off, the hashing queue's fair share alone keeps sign-ins working", func(t *testing.T) {
		p, _ := abuseBinary(t, "limits: { password_check_per_user: \"off\", password_check_per_ip: \"off\" }\n")
		victims, flood, _ := signInsUnderFlood(t, p)
		t.Logf("MEASURE sign-in success under a change-password flood (its limits off): %d/%d; flood statuses %v", successRate(victims), len(victims), flood)
		if successRate(victims) != len(victims) {
			t.Errorf("victims' sign-ins: got %v, want every one 200", victims)
		}
		if flood[503] == 0 {
			t.Errorf("flood statuses %v: want the flood to have filled the hashing queue (503s), or this proves nothing", flood)
		}
	})

	t.Run("a verification link does not sign a browser into another account", func(t *testing.T) {
		p, _ := abuseBinary(t, "")
		signUpFrom(t, p.instance, "198.51.100.7", "mallory@example.com")
		victim := signUpFrom(t, p.instance, "203.0.113.9", "victim@example.com")
		res, body := p.do(t, "POST", "/api/auth/send-verification-email", `{"email":"mallory@example.com"}`, from("198.51.100.7")...)
		if res.StatusCode != 200 {
			t.Fatalf("send-verification-email: got %d %s", res.StatusCode, body)
		}
		link := waitMail(t, p.stderr.String, "email_verification", "mallory@example.com", 0)
		// The victim's browser follows the link (a top-level navigation
		// carries the Lax cookie).
		res = noFollow(t, link, append(from("203.0.113.9"), "Cookie", victim)...)
		if res.StatusCode != 302 {
			t.Errorf("verification link: got %d, want 302", res.StatusCode)
		}
		if c := sessionCookie(res); c != nil {
			t.Errorf("verification link opened in the victim's browser set a session cookie (%s): login CSRF", c.Name)
		}
		res, body = p.do(t, "GET", "/api/auth/get-session", "", "Cookie", victim)
		if res.StatusCode != 200 || !strings.Contains(string(body), `"email":"victim@example.com"`) {
			t.Errorf("victim's session after the link: got %d %s, want still victim@example.com", res.StatusCode, body)
		}
		// By default the link signs in nobody, not even a browser without
		// a session; the address is verified all the same.
		p.do(t, "POST", "/api/auth/send-verification-email", `{"email":"victim@example.com"}`, from("203.0.113.9")...)
		link = waitMail(t, p.stderr.String, "email_verification", "victim@example.com", 0)
		res = noFollow(t, link, from("203.0.113.9")...)
		if c := sessionCookie(res); res.StatusCode != 302 || c != nil {
			t.Errorf("verification link without a session: got %d, cookie %v; want 302 and no session", res.StatusCode, c)
		}
		res, body = p.do(t, "GET", "/api/auth/get-session", "", "Cookie", victim)
		if !strings.Contains(string(body), `"emailVerified":true`) {
			t.Errorf("after the link: got %d %s, want the address verified", res.StatusCode, body)
		}
	})

	t.Run("with sign_in_after_verification, the link signs in only a browser without a session", func(t *testing.T) {
		p, _ := abuseBinary(t, "auth: { sign_in_after_verification: true }\n")
		signUpFrom(t, p.instance, "198.51.100.7", "mallory@example.com")
		victim := signUpFrom(t, p.instance, "203.0.113.9", "victim@example.com")
		p.do(t, "POST", "/api/auth/send-verification-email", `{"email":"mallory@example.com"}`, from("198.51.100.7")...)
		link := waitMail(t, p.stderr.String, "email_verification", "mallory@example.com", 0)
		if c := sessionCookie(noFollow(t, link, append(from("203.0.113.9"), "Cookie", victim)...)); c != nil {
			t.Errorf("the link in the victim's browser set %s: login CSRF", c.Name)
		}
		_, body := p.do(t, "GET", "/api/auth/get-session", "", "Cookie", victim)
		if !strings.Contains(string(body), `"email":"victim@example.com"`) {
			t.Errorf("victim's session after the link: %s", body)
		}
		p.do(t, "POST", "/api/auth/send-verification-email", `{"email":"victim@example.com"}`, from("203.0.113.9")...)
		link = waitMail(t, p.stderr.String, "email_verification", "victim@example.com", 0)
		c := sessionCookie(noFollow(t, link, from("203.0.113.9")...))
		if c == nil {
			t.Fatal("the link in a browser without a session set no session")
		}
		_, body = p.do(t, "GET", "/api/auth/get-session", "", "Cookie", c.Name+"="+c.Value)
		if !strings.Contains(string(body), `"email":"victim@example.com"`) || !strings.Contains(string(body), `"emailVerified":true`) {
			t.Errorf("the session the link made: %s", body)
		}
	})

	t.Run("POST /-/reload with metrics.reload_token_env needs the token", func(t *testing.T) {
		const token = "abuse-test-reload-token-0123456789"
		q, _ := abuseBinary(t, "metrics: { reload_token_env: RELOAD_TOKEN }\n", "RELOAD_TOKEN="+token)
		for _, tc := range []struct {
			auth string
			want int
		}{{"", 401}, {"Bearer not-the-token-0123456789", 401}, {"Bearer " + token, 200}} {
			req, _ := http.NewRequest("POST", q.metrics+"/-/reload", nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Errorf("Authorization %q: got %d %s, want %d", strings.Split(tc.auth, " ")[0], res.StatusCode, b, tc.want)
			}
		}
	})

	t.Run("the admin listener refuses what a browser page sends", func(t *testing.T) {
		p, _ := abuseBinary(t, "")
		for _, hdr := range [][]string{
			{"Origin", "http://evil.example"},
			{"Origin", "null"},
			{"Sec-Fetch-Site", "cross-site"},
			{"Sec-Fetch-Site", "same-site"},
			{"Sec-Fetch-Site", "same-origin"},
		} {
			for _, target := range []string{"POST /-/reload", "GET /metrics"} {
				method, path, _ := strings.Cut(target, " ")
				req, _ := http.NewRequest(method, p.metrics+path, nil)
				req.Header.Set(hdr[0], hdr[1])
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 403 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
					t.Errorf("%s with %s: %s: got %d %.60s, want 403 JSON", target, hdr[0], hdr[1], res.StatusCode, b)
				}
			}
		}
		// What an operator's curl or Prometheus sends still works.
		req, _ := http.NewRequest("POST", p.metrics+"/-/reload", nil)
		req.Header.Set("Sec-Fetch-Site", "none") // a typed URL, a bookmark
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("POST /-/reload with Sec-Fetch-Site: none: got %d, want 200", res.StatusCode)
		}
	})

	t.Run("a reload keeps the limits' state", func(t *testing.T) {
		p, _ := abuseBinary(t, "limits: { signin_per_ip: 3/m }\n")
		signIn := func(i int) int {
			res, _ := p.do(t, "POST", "/api/auth/sign-in/email", fmt.Sprintf(`{"email":"guess%d@example.com","password":"wrong-password"}`, i), from("192.0.2.1")...)
			return res.StatusCode
		}
		var got []int
		for i := range 4 {
			got = append(got, signIn(i))
		}
		res, err := http.Post(p.metrics+"/-/reload", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("reload: got %d", res.StatusCode)
		}
		got = append(got, signIn(4))
		if fmt.Sprint(got) != "[401 401 401 429 429]" {
			t.Errorf("sign-ins before and after a reload: got %v, want [401 401 401 429 429] (the flood must not continue after a reload)", got)
		}
	})

	t.Run("IPv6 clients are limited per /64", func(t *testing.T) {
		p, _ := abuseBinary(t, "limits: { signin_per_ip: 3/m }\n")
		var got []int
		for _, ip := range []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:aaaa::3", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:3::1", "192.0.2.1", "192.0.2.2"} {
			res, _ := p.do(t, "POST", "/api/auth/sign-in/email", fmt.Sprintf(`{"email":"guess-%s@example.com","password":"wrong-password"}`, strings.ReplaceAll(ip, ":", "-")), from(ip)...)
			got = append(got, res.StatusCode)
		}
		if fmt.Sprint(got) != "[401 401 401 429 401 401 401]" {
			t.Errorf("sign-ins from one /64, then another /64, then two IPv4 addresses: got %v, want [401 401 401 429 401 401 401]", got)
		}
	})

	t.Run("identity headers other proxies set never reach the upstream", func(t *testing.T) {
		p, up := abuseBinary(t, "")
		cookie := signUpFrom(t, p.instance, "192.0.2.1", "ann@example.com")
		jwt := getJWT(t, p.instance, cookie)
		spoofed := []string{"Remote-User", "X-Forwarded-User", "X-Forwarded-Email", "X-Auth-Request-User", "X-Auth-Request-Email", "X-Remote-User", "X-Forwarded-Preferred-Username", "X-Webauth-User", "Remote-Email"}
		for _, path := range []string{"/api/tasks", "/index.html"} {
			hdr := []string{"Authorization", "Bearer " + jwt}
			for _, h := range spoofed {
				hdr = append(hdr, h, "admin@example.com")
			}
			res, body := p.do(t, "GET", path, "", hdr...)
			if res.StatusCode != 200 {
				t.Fatalf("GET %s: got %d %s", path, res.StatusCode, body)
			}
			seen, _ := up.last()
			for _, h := range spoofed {
				if v := seen.Get(h); v != "" {
					t.Errorf("GET %s: the upstream got %s: %s", path, h, v)
				}
			}
		}
	})

	t.Run("a slow body on /api/auth is cut off", func(t *testing.T) {
		p, up := abuseBinary(t, "limits: { body_read_timeout: 1s }\n")
		conn, err := net.Dial("tcp", strings.TrimPrefix(p.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprint(conn, "POST /api/auth/sign-in/email HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("a body that never arrives: no answer within 30s (%v): the connection is held as long as the client likes", err)
		}
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 408 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
			t.Errorf("a body that never arrives: got %d %s, want 408 JSON", res.StatusCode, b)
		}
		// A business body streams to the upstream for as long as it takes.
		cookie := signUpFrom(t, p.instance, "192.0.2.1", "ann@example.com")
		jwt := getJWT(t, p.instance, cookie)
		pr, pw := io.Pipe()
		go func() {
			for i := range 6 {
				fmt.Fprintf(pw, "chunk-%d;", i)
				time.Sleep(500 * time.Millisecond)
			}
			pw.Close()
		}()
		req, _ := http.NewRequest("POST", p.base+"/api/upload", pr)
		req.Header.Set("Authorization", "Bearer "+jwt)
		res, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if _, body := up.last(); res.StatusCode != 200 || body != "chunk-0;chunk-1;chunk-2;chunk-3;chunk-4;chunk-5;" {
			t.Errorf("a business body sent over 3s with a 1s auth body deadline: got %d, the upstream read %q", res.StatusCode, body)
		}
	})

	t.Run("the per-email lock-out is visible in the metrics", func(t *testing.T) {
		p, _ := abuseBinary(t, "")
		var got []int
		for i := range 6 {
			res, _ := p.do(t, "POST", "/api/auth/sign-in/email", `{"email":"target@example.com","password":"wrong-password"}`, from(fmt.Sprintf("192.0.2.%d", i+1))...)
			got = append(got, res.StatusCode)
		}
		if fmt.Sprint(got) != "[401 401 401 401 401 429]" {
			t.Errorf("six wrong passwords for one address from six addresses: got %v", got)
		}
		res, err := http.Get(p.metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !strings.Contains(string(b), `authsidecar_signins_total{result="locked_out"} 1`) {
			t.Errorf("metrics lack authsidecar_signins_total{result=\"locked_out\"} 1:\n%s", grepLines(string(b), "authsidecar_signins_total"))
		}
	})
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
