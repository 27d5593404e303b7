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
	signUp(t, p.sidecar, "hugo@example.com", "correct-horse-battery")
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
		res, body := (&sidecar{base: p.metrics}).do(t, "POST", "/-/reload", "")
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
		res, body := (&sidecar{base: p.metrics}).do(t, "POST", "/-/reload", "")
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

// TestReloadVerifier: a verifier reloads too (its generation has no
// issuer): allowed hosts and stale_if_error apply; a new keys.jwks_url is
// refused, being a restart key.
func TestReloadVerifier(t *testing.T) {
	up := echoUpstream(t)
	issuerFile := newReloadFile(t, up.URL)
	issuerFile.write(t, "")
	iss := startSidecar(t, issuerFile.path, issuerFile.port, e2eSecret)
	_, jwt := signUp(t, iss, "vera@example.com", "correct-horse-battery")

	dir := t.TempDir()
	port, metricsPort := freePort(t), freePort(t)
	path := filepath.Join(dir, "verifier.yaml")
	write := func(extra string) {
		writeFile(t, path, fmt.Sprintf("mode: verifier\nlisten: \"127.0.0.1:%d\"\nmetrics: { listen: \"127.0.0.1:%d\" }\nupstream: %q\nlog: { format: json, level: info }\n%s",
			port, metricsPort, up.URL, extra))
	}
	jwks := fmt.Sprintf("keys: { jwks_url: \"%s/api/auth/jwks\", stale_if_error: %%s }\n", iss.base)
	write(fmt.Sprintf(jwks, "1h"))
	v := startSidecar(t, path, port, "")
	admin := &sidecar{base: v.metrics}
	if got := status(t, v, "/api/tasks", jwt); got != 200 {
		t.Fatalf("verifier before any reload: got %d, want 200", got)
	}

	write(fmt.Sprintf(jwks, "2h") + "proxy: { allowed_hosts: [\"api.example.com\"] }\n")
	if res, body := admin.do(t, "POST", "/-/reload", ""); res.StatusCode != 200 {
		t.Fatalf("reload: got %d %s, want 200", res.StatusCode, body)
	}
	res, body := v.do(t, "GET", "/api/tasks", "", "Authorization", "Bearer "+jwt)
	if res.StatusCode != 400 || jsonCode(body) != "BAD_HOST" {
		t.Errorf("host 127.0.0.1 once only api.example.com is allowed: got %d %s, want 400 BAD_HOST", res.StatusCode, body)
	}

	write(strings.Replace(fmt.Sprintf(jwks, "2h"), "/api/auth/jwks", "/other/jwks", 1))
	res, body = admin.do(t, "POST", "/-/reload", "")
	if res.StatusCode != 500 || !strings.Contains(string(body), "changed keys need a restart: keys.jwks_url") {
		t.Fatalf("reload with a new jwks_url: got %d %s, want 500 naming keys.jwks_url", res.StatusCode, body)
	}
	if res, _ := v.do(t, "GET", "/api/tasks", "", "Authorization", "Bearer "+jwt); res.StatusCode != 400 {
		t.Errorf("after a refused reload: got %d, want 400 (the allowed hosts in force stay)", res.StatusCode)
	}
}
