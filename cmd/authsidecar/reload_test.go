package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// reloadFile writes the config of a reload test: fixed ports and paths on
// lines 1 to 6, then extra from line 7.
type reloadFile struct {
	path, db, upstream string
	port, metricsPort  int
	log                string // line 5's flow mapping
}

func newReloadFile(t *testing.T, upstream string) *reloadFile {
	dir := t.TempDir()
	return &reloadFile{
		path: filepath.Join(dir, "sidecar.yaml"), db: filepath.Join(dir, "auth.db"), upstream: upstream,
		port: freePort(t), metricsPort: freePort(t), log: "{ format: json, level: info }",
	}
}

func (f *reloadFile) write(t *testing.T, extra string) {
	t.Helper()
	writeFile(t, f.path, fmt.Sprintf("listen: \"127.0.0.1:%d\"\nbase_url: \"http://127.0.0.1:%d\"\nupstream: %q\ndatabase: { driver: sqlite, path: %q }\nlog: %s\nmetrics: { listen: \"127.0.0.1:%d\" }\n%s",
		f.port, f.port, f.upstream, f.db, f.log, f.metricsPort, extra))
}

// hup sends SIGHUP and waits for the log line that ends the reload it
// causes: "config reloaded" or "config reload refused". It returns that
// line.
func (p *process) hup(t *testing.T) string {
	t.Helper()
	before := len(reloadLines(p.stderr.String()))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if lines := reloadLines(p.stderr.String()); len(lines) > before {
			return lines[before]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reload log line 10s after SIGHUP:\n%s", tail(p.stderr.String(), 2000))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func reloadLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `"msg":"config reloaded"`) || strings.Contains(l, `"msg":"config reload refused`) {
			out = append(out, l)
		}
	}
	return out
}

// metricValue reads one sample from /metrics: the gauge or counter name
// whose labels include want. ok is false when there is none.
func metricValue(t *testing.T, url, name string, want map[string]string) (v float64, labels map[string]string, ok bool) {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	f, found := families[name]
	if !found {
		return 0, nil, false
	}
next:
	for _, m := range f.GetMetric() {
		labels = map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		if m.Counter != nil {
			return m.GetCounter().GetValue(), labels, true
		}
		return m.GetGauge().GetValue(), labels, true
	}
	return 0, nil, false
}

// TestReloadBinary: SIGHUP applies a new trusted origin to the running
// binary (CORS and the sign-in origin check); an invalid file and a changed
// restart key are refused whole, with the line and the key named, and the
// config in force stays; POST /-/reload does the same on the admin port.
func TestReloadBinary(t *testing.T) {
	up := echoUpstream(t)
	f := newReloadFile(t, up.URL)
	f.write(t, "")
	p := startBinary(t, f.path, f.port, "AUTH_SECRET="+e2eSecret)
	const origin = "https://app.example.com"
	signUp(t, p.instance, "hugo@example.com", "correct-horse-battery")
	signIn := func() int {
		res, _ := p.do(t, "POST", "/api/auth/sign-in/email", `{"email":"hugo@example.com","password":"correct-horse-battery"}`, "Origin", origin)
		return res.StatusCode
	}
	preflight := func() string {
		res, _ := p.do(t, "OPTIONS", "/api/auth/sign-in/email", "", "Origin", origin, "Access-Control-Request-Method", "POST")
		return res.Header.Get("Access-Control-Allow-Origin")
	}
	reloads := func(result string) float64 {
		v, _, ok := metricValue(t, p.metrics, "authsidecar_config_reloads_total", map[string]string{"result": result})
		if !ok {
			t.Fatalf("no authsidecar_config_reloads_total{result=%q}", result)
		}
		return v
	}
	hash := func() string {
		_, l, ok := metricValue(t, p.metrics, "authsidecar_config_info", nil)
		if !ok {
			t.Fatal("no authsidecar_config_info")
		}
		return l["hash"]
	}
	started, _, _ := metricValue(t, p.metrics, "authsidecar_config_last_reload_success_timestamp_seconds", nil)
	if now := float64(time.Now().Unix()); started < now-60 || started > now+1 {
		t.Errorf("last reload success at start-up: got %v, want about %v", started, now)
	}
	if s, f := reloads("success"), reloads("failure"); s != 0 || f != 0 {
		t.Errorf("at start-up: got %v successes, %v failures, want 0 and 0", s, f)
	}
	startHash := hash()

	if got := signIn(); got != http.StatusForbidden {
		t.Fatalf("sign-in from %s before it is trusted: got %d, want 403", origin, got)
	}
	if got := preflight(); got != "" {
		t.Fatalf("preflight from %s before it is trusted: got Access-Control-Allow-Origin %q, want none", origin, got)
	}

	t.Run("trusted origin added", func(t *testing.T) {
		f.write(t, "auth: { trusted_origins: [\""+origin+"\"] }\n")
		if line := p.hup(t); !strings.Contains(line, `"msg":"config reloaded"`) {
			t.Fatalf("got %s, want config reloaded", line)
		}
		if got := signIn(); got != http.StatusOK {
			t.Errorf("sign-in from %s after the reload: got %d, want 200", origin, got)
		}
		if got := preflight(); got != origin {
			t.Errorf("preflight after the reload: got Access-Control-Allow-Origin %q, want %q", got, origin)
		}
		if got := reloads("success"); got != 1 {
			t.Errorf("got %v successful reloads, want 1", got)
		}
		if got := hash(); got == startHash || len(got) != 12 {
			t.Errorf("config_info hash after the reload: got %q, want 12 hex digits other than %q", got, startHash)
		}
	})
	inForce := hash()

	refused := []struct {
		name  string
		extra string
		want  *regexp.Regexp // in the log line
	}{
		// Line 7: the first line after the six fixed ones.
		{"unknown key", "auth: { trusted_origins: [\"" + origin + "\"] }\nbogus_key: 1\n", regexp.MustCompile(`sidecar\.yaml:8: .*bogus_key`)},
		{"invalid value", "auth: { trusted_origins: [\"https://APP.example.com/\"] }\n", regexp.MustCompile(`sidecar\.yaml:7: auth\.trusted_origins`)},
		{"restart key", "auth: { trusted_origins: [\"" + origin + "\"], jwt_ttl: 1h }\n", regexp.MustCompile(`changed keys need a restart: auth\.jwt_ttl"`)},
	}
	for i, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			f.write(t, tt.extra)
			line := p.hup(t)
			if !strings.Contains(line, `"msg":"config reload refused`) || !tt.want.MatchString(line) {
				t.Fatalf("got log line %s, want a refusal matching %s", line, tt.want)
			}
			if got := signIn(); got != http.StatusOK {
				t.Errorf("sign-in from %s after a refused reload: got %d, want 200 (the config in force stays)", origin, got)
			}
			if got := reloads("failure"); got != float64(i+1) {
				t.Errorf("got %v failed reloads, want %d", got, i+1)
			}
			if got := hash(); got != inForce {
				t.Errorf("config_info hash after a refused reload: got %q, want %q (unchanged)", got, inForce)
			}
		})
	}

	t.Run("listen changed, by POST /-/reload", func(t *testing.T) {
		moved := *f
		moved.port = freePort(t) // listen and base_url
		moved.write(t, "")
		res, body := (&instance{base: p.metrics}).do(t, "POST", "/-/reload", "")
		if res.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "changed keys need a restart: listen, base_url") {
			t.Fatalf("got %d %s, want 500 naming listen and base_url", res.StatusCode, body)
		}
		// The log is written in batches: wait for the line.
		for deadline := time.Now().Add(5 * time.Second); !strings.Contains(p.stderr.String(), "changed keys need a restart: listen, base_url"); {
			if time.Now().After(deadline) {
				t.Fatal("no log line names listen and base_url")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if got := signIn(); got != http.StatusOK {
			t.Errorf("sign-in after a refused reload: got %d, want 200", got)
		}
		if got := reloads("failure"); got != 4 {
			t.Errorf("got %v failed reloads, want 4", got)
		}
	})

	t.Run("origin removed, by POST /-/reload", func(t *testing.T) {
		f.write(t, "")
		res, body := (&instance{base: p.metrics}).do(t, "POST", "/-/reload", "")
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), startHash) {
			t.Fatalf("got %d %s, want 200 with hash %s", res.StatusCode, body, startHash)
		}
		if got := signIn(); got != http.StatusForbidden {
			t.Errorf("sign-in from %s once no longer trusted: got %d, want 403", origin, got)
		}
		if got := reloads("success"); got != 2 {
			t.Errorf("got %v successful reloads, want 2", got)
		}
	})
}

// signInJWT signs an existing user in and returns a JWT from the session.
func signInJWT(t *testing.T, s *instance, email, password string) string {
	t.Helper()
	res, body := s.do(t, "POST", "/api/auth/sign-in/email", fmt.Sprintf(`{"email":%q,"password":%q}`, email, password))
	if res.StatusCode != 200 || len(res.Cookies()) != 1 {
		t.Fatalf("sign-in %s: got %d %s", email, res.StatusCode, body)
	}
	return getJWT(t, s, res.Cookies()[0].Name+"="+res.Cookies()[0].Value)
}

// twoIssuers starts two full sidecars, A and B, on two origins, B's
// database a copy of A's: they sign with the same key under the same kid,
// so only iss and aud tell their tokens apart (nothing, when extra sets
// one auth.issuer for both). It returns them and a JWT of each for one
// user.
func twoIssuers(t *testing.T, upstream, extra string) (a, b *instance, jwtA, jwtB string) {
	t.Helper()
	const email, password = "vera@example.com", "correct-horse-battery"
	fa := newReloadFile(t, upstream)
	fa.write(t, extra)
	a = startSidecar(t, fa.path, fa.port, e2eSecret)
	_, jwtA = signUp(t, a, email, password)
	fb := newReloadFile(t, upstream)
	cliWithEnv(t, map[string]string{"AUTH_SECRET": e2eSecret}, argv(fa.path, "db backup", fb.db)...)
	fb.write(t, extra)
	b = startSidecar(t, fb.path, fb.port, e2eSecret)
	jwtB = signInJWT(t, b, email, password)
	if ka, kb := kidOf(t, jwtA), kidOf(t, jwtB); ka != kb {
		t.Fatalf("issuers A and B sign with kids %q and %q, want one key", ka, kb)
	}
	return a, b, jwtA, jwtB
}

// TestReloadVerifier: a verifier reloads too (its generation has no
// issuer). A reload to an unreachable keys.jwks_url is refused whole (the
// allowed hosts in the same file do not apply either), counted, and the
// keys in force stay. A reload to another issuer's JWKS URL switches the
// key set and the expected iss/aud together: B's token, refused before,
// passes; A's token, cached before the switch, is refused for its issuer
// although its key and signature are B's too. Allowed hosts and
// stale_if_error apply.
func TestReloadVerifier(t *testing.T) {
	up := echoUpstream(t)
	issA, issB, jwtA, jwtB := twoIssuers(t, up.URL, "")

	dir := t.TempDir()
	port, metricsPort := freePort(t), freePort(t)
	path := filepath.Join(dir, "verifier.yaml")
	stale := "1h" // keys.stale_if_error
	write := func(jwksBase, extra string) {
		writeFile(t, path, fmt.Sprintf("mode: verifier\nlisten: \"127.0.0.1:%d\"\nmetrics: { listen: \"127.0.0.1:%d\" }\nupstream: %q\nlog: { format: json, level: info }\nkeys: { jwks_url: \"%s/api/auth/jwks\", stale_if_error: %s }\n%s",
			port, metricsPort, up.URL, jwksBase, stale, extra))
	}
	write(issA.base, "")
	v := startSidecar(t, path, port, "")
	admin := &instance{base: v.metrics}
	metric := func(name string, labels ...string) float64 {
		t.Helper()
		want := map[string]string{}
		for i := 0; i+1 < len(labels); i += 2 {
			want[labels[i]] = labels[i+1]
		}
		got, _, ok := metricValue(t, v.metrics, name, want)
		if !ok {
			t.Fatalf("no %s%v", name, labels)
		}
		return got
	}
	wrongIssuer := func() float64 {
		return metric("authsidecar_auth_failures_total", "class", "business", "reason", "wrong_issuer")
	}
	readyz := func() int {
		res, err := http.Get(v.metrics + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}

	t.Run("on A", func(t *testing.T) {
		hits := metric("authsidecar_token_cache_hits_total")
		for range 2 {
			if got := status(t, v, "/api/tasks", jwtA); got != 200 {
				t.Fatalf("A's token: got %d, want 200", got)
			}
		}
		if got := metric("authsidecar_token_cache_hits_total"); got != hits+1 {
			t.Fatalf("A's token twice: got %v token cache hits, want %v (it is cached)", got, hits+1)
		}
		if got := status(t, v, "/api/tasks", jwtB); got != 401 {
			t.Errorf("B's token while A's JWKS is in force: got %d, want 401", got)
		}
		if got := wrongIssuer(); got != 1 {
			t.Errorf("B's token refused for its issuer: got %v wrong_issuer failures, want 1", got)
		}
	})

	t.Run("unreachable jwks_url refused whole", func(t *testing.T) {
		dead := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
		write(dead, "proxy: { allowed_hosts: [\"api.example.com\"] }\n")
		res, body := admin.do(t, "POST", "/-/reload", "")
		if res.StatusCode != 500 || !strings.Contains(string(body), "keys.jwks_url: no usable key set") || !strings.Contains(string(body), dead) {
			t.Fatalf("reload to %s: got %d %s, want 500 naming keys.jwks_url and the URL", dead, res.StatusCode, body)
		}
		if got := status(t, v, "/api/tasks", jwtA); got != 200 {
			t.Errorf("A's token after the refused reload: got %d, want 200 (A's keys and the old allowed hosts stay)", got)
		}
		if got := status(t, v, "/api/tasks", jwtB); got != 401 {
			t.Errorf("B's token after the refused reload: got %d, want 401", got)
		}
		if got := metric("authsidecar_config_reloads_total", "result", "failure"); got != 1 {
			t.Errorf("got %v failed reloads, want 1", got)
		}
		// The key set in force was not read, so its refresh counters and
		// gauges do not move: the refusal is the reload's failure alone.
		if got := metric("authsidecar_keyset_refreshes_total", "trigger", "boot", "result", "error"); got != 0 {
			t.Errorf("got %v boot refresh errors, want 0", got)
		}
		if got := metric("authsidecar_keyset_usable"); got != 1 || readyz() != 200 {
			t.Errorf("after the refused reload: keyset_usable %v, /readyz %d; want 1 and 200", got, readyz())
		}
	})

	t.Run("switched to B", func(t *testing.T) {
		write(issB.base, "")
		if res, body := admin.do(t, "POST", "/-/reload", ""); res.StatusCode != 200 {
			t.Fatalf("reload to B: got %d %s, want 200", res.StatusCode, body)
		}
		if got := status(t, v, "/api/tasks", jwtB); got != 200 {
			t.Errorf("B's token once B's JWKS is in force: got %d, want 200", got)
		}
		before := wrongIssuer()
		if got := status(t, v, "/api/tasks", jwtA); got != 401 {
			t.Errorf("A's token, cached before the switch: got %d, want 401 (its iss is A's origin)", got)
		}
		if got := wrongIssuer(); got != before+1 {
			t.Errorf("A's token after the switch: got %v wrong_issuer failures, want %v", got, before+1)
		}
		if got := metric("authsidecar_keyset_refreshes_total", "trigger", "boot", "result", "ok"); got != 2 {
			t.Errorf("got %v boot reads, want 2 (A's at start, B's at the switch)", got)
		}
		if age := metric("authsidecar_keyset_age_seconds"); age > 5 {
			t.Errorf("keyset age right after the switch: got %vs, want B's fresh set", age)
		}
		if got := metric("authsidecar_keyset_usable"); got != 1 || readyz() != 200 {
			t.Errorf("on B: keyset_usable %v, /readyz %d; want 1 and 200", got, readyz())
		}
		if got := metric("authsidecar_config_reloads_total", "result", "success"); got != 1 {
			t.Errorf("got %v successful reloads, want 1", got)
		}
	})

	t.Run("allowed hosts and stale_if_error", func(t *testing.T) {
		stale = "2h"
		write(issB.base, "proxy: { allowed_hosts: [\"api.example.com\"] }\n")
		if res, body := admin.do(t, "POST", "/-/reload", ""); res.StatusCode != 200 {
			t.Fatalf("reload: got %d %s, want 200", res.StatusCode, body)
		}
		res, body := v.do(t, "GET", "/api/tasks", "", "Authorization", "Bearer "+jwtB)
		if res.StatusCode != 400 || jsonCode(body) != "BAD_HOST" {
			t.Errorf("host 127.0.0.1 once only api.example.com is allowed: got %d %s, want 400 BAD_HOST", res.StatusCode, body)
		}
	})
}
