package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// dashboardFile is the Grafana dashboard shipped for operators.
const dashboardFile = "../../deploy/grafana/authsidecar.json"

// prometheusServer returns the Prometheus server binary (Debian's
// prometheus package, which .ci/run installs for promtool); without it the
// test skips, and fails under CI.
func prometheusServer(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/prometheus"); err == nil {
		return "/usr/bin/prometheus"
	}
	if os.Getenv("CI") != "" {
		t.Fatal("the prometheus server binary is missing under CI (apt-get install prometheus)")
	}
	t.Skip("needs the prometheus server binary (apt-get install prometheus)")
	return ""
}

// shortenedFor matches an alert's `for:` line.
var shortenedFor = regexp.MustCompile(`(?m)^(\s+for: )[0-9]+[smh]\s*$`)

// promRun is a running Prometheus server.
type promRun struct {
	base string // http://127.0.0.1:port
	log  *syncBuffer
}

// startPrometheus runs a Prometheus server scraping target every second
// with the rules file, its storage and its port private to the test. The
// whole process group is stopped at cleanup.
func startPrometheus(t *testing.T, target, rulesPath string) *promRun {
	t.Helper()
	bin := prometheusServer(t)
	dir := t.TempDir()
	// scrape_timeout defaults to 10s, more than the interval: Prometheus
	// refuses that, so it is set too.
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: authsidecar
    static_configs:
      - targets: [%q]
`, rulesPath, target)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	writeFile(t, cfgPath, cfg)
	p := &promRun{base: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), log: &syncBuffer{}}
	cmd := exec.Command(bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+strings.TrimPrefix(p.base, "http://"),
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", tail(p.log.String(), 4000))
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if res, err := http.Get(p.base + "/-/ready"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case err := <-done:
			t.Fatalf("prometheus exited: %v\n%s", err, p.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within 30s:\n%s", p.log.String())
		}
	}
}

// apiGet reads one Prometheus HTTP API answer into data; an answer whose
// status is not success is an error naming Prometheus's message.
func (p *promRun) apiGet(path string, params url.Values, data any) error {
	res, err := http.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	var env struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("GET %s: %s: %w", path, body, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("GET %s: %s: %s", path, env.ErrorType, env.Error)
	}
	return json.Unmarshal(env.Data, data)
}

type promSample struct {
	Metric map[string]string
	Value  float64
}

// query runs an instant query; the value of each result is parsed.
func (p *promRun) query(expr string) ([]promSample, error) {
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := p.apiGet("/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, fmt.Errorf("query %q: %w", expr, err)
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("query %q: result type %q, want vector", expr, data.ResultType)
	}
	var out []promSample
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: value %v: %w", expr, r.Value[1], err)
		}
		out = append(out, promSample{r.Metric, v})
	}
	return out, nil
}

// waitQuery polls expr until ok accepts its result.
func (p *promRun) waitQuery(t *testing.T, expr string, d time.Duration, ok func([]promSample) bool) []promSample {
	t.Helper()
	var last []promSample
	var err error
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if last, err = p.query(expr); err == nil && ok(last) {
			return last
		}
	}
	t.Fatalf("%q: not as expected within %s: last %v (err %v)", expr, d, last, err)
	return nil
}

type promAlert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
	Value    string            `json:"value"`
}

func (p *promRun) alerts(t *testing.T) []promAlert {
	t.Helper()
	var data struct{ Alerts []promAlert }
	if err := p.apiGet("/api/v1/alerts", nil, &data); err != nil {
		t.Fatal(err)
	}
	return data.Alerts
}

// forge signs a JWT's header and claims with a key of the test's own: the
// same kid, a signature the sidecar's key did not make (bad_signature).
func forge(t *testing.T, jwt string) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("JWT %q: not three parts", jwt)
	}
	signed := parts[0] + "." + parts[1]
	return signed + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(signed)))
}

// traffic sends business requests, one client per token, until the
// returned stop is called; stop returns how many were answered with want
// and how many otherwise (or failed). Each client waits 2 ms between
// requests: the rules read ratios, and the machine is shared.
func traffic(base string, tokens []string, want int) (stop func() (wanted, other int64)) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: len(tokens)}}
	var ok, bad atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, tok := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				case <-time.After(2 * time.Millisecond):
				}
				req, _ := http.NewRequest("GET", base+"/api/tasks", nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				res, err := client.Do(req)
				if err != nil {
					bad.Add(1)
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode == want {
					ok.Add(1)
				} else {
					bad.Add(1)
				}
			}
		}()
	}
	return func() (int64, int64) {
		close(done)
		wg.Wait()
		client.CloseIdleConnections()
		return ok.Load(), bad.Load()
	}
}

// TestPrometheusEndToEnd runs a real Prometheus server scraping the built
// binary every second, with deploy/prometheus/rules.yml loaded: the
// target is up, every rule evaluates without error, the recording rules
// produce values, good traffic raises no alert, a flood of forged tokens
// makes the token alerts fire and leaves every other alert quiet, and every
// query of the Grafana dashboard runs on the real data and reads only
// series the binary exports.
func TestPrometheusEndToEnd(t *testing.T) {
	prometheusServer(t) // skip before building anything
	start := time.Now()
	dir := t.TempDir()

	// The alerts wait 1 to 15 minutes (`for:`) before firing; a test
	// cannot. The copy Prometheus loads has every `for:` cut to 3s and is
	// otherwise the shipped file, expressions and thresholds unchanged.
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	fors := len(shortenedFor.FindAll(raw, -1))
	if fors == 0 || fors != strings.Count(string(raw), "for: ") {
		t.Fatalf("%s: %d `for:` lines matched of %d: update shortenedFor", rulesFile, fors, strings.Count(string(raw), "for: "))
	}
	rulesCopy := filepath.Join(dir, "rules.yml")
	writeFile(t, rulesCopy, shortenedFor.ReplaceAllString(string(raw), "${1}3s"))
	var rules struct {
		Groups []struct {
			Rules []struct{ Record, Alert string }
		}
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	var records, alertNames []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				records = append(records, r.Record)
			} else {
				alertNames = append(alertNames, r.Alert)
			}
		}
	}

	up := echoUpstream(t)
	cfg, port := writeConfigFile(t, dir, "sidecar.yaml", fmt.Sprintf("base_url: \"http://app.example.test\"\nupstream: %q\ndatabase: { driver: sqlite, path: %q }\n", up.URL, filepath.Join(dir, "auth.db")))
	sc := startBinary(t, cfg, port, "AUTH_SECRET="+e2eSecret)
	exported := map[string]bool{}
	for _, s := range scrapeSeries(t, sc.metrics+"/metrics") {
		exported[s.name] = true
	}
	prom := startPrometheus(t, strings.TrimPrefix(sc.metrics, "http://"), rulesCopy)

	// Scraped before any traffic, so rate() sees the first requests.
	prom.waitQuery(t, `up{job="authsidecar"}`, 20*time.Second, func(s []promSample) bool { return len(s) == 1 && s[0].Value == 1 })
	t.Logf("target up after %s", time.Since(start).Round(time.Millisecond))

	// Good traffic: sign-ups, sign-ins (one with a wrong password),
	// get-session, business requests with the JWTs.
	var jwts []string
	for i := range 3 {
		email := fmt.Sprintf("p%d@example.com", i)
		signUp(t, sc.instance, email, "correct-horse-battery")
		res, body := sc.do(t, "POST", "/api/auth/sign-in/email", fmt.Sprintf(`{"email":%q,"password":"correct-horse-battery"}`, email))
		if res.StatusCode != 200 || len(res.Cookies()) != 1 {
			t.Fatalf("sign-in: got %d %s", res.StatusCode, body)
		}
		jwts = append(jwts, getJWT(t, sc.instance, res.Cookies()[0].Name+"="+res.Cookies()[0].Value))
	}
	if res, _ := sc.do(t, "POST", "/api/auth/sign-in/email", `{"email":"p0@example.com","password":"wrong-horse-battery"}`); res.StatusCode != 401 {
		t.Fatalf("sign-in with a wrong password: got %d, want 401", res.StatusCode)
	}
	// Good traffic from two clients until the recorded request rate passes
	// the alerts' "more than 1 request a second" guard, so the check
	// below covers the guarded alerts too. It runs for seconds, not as one
	// burst: authsidecar_requests_total{code="200"} appears with its first
	// request, and rate() cannot count what a series held when first
	// scraped.
	good := traffic(sc.base, jwts[:2], 200)
	prom.waitQuery(t, `job:authsidecar_requests:rate5m{job="authsidecar"}`, 30*time.Second,
		func(s []promSample) bool { return len(s) == 1 && s[0].Value > 1 })
	if ok, bad := good(); ok == 0 || bad != 0 {
		t.Fatalf("good tokens: %d answers 200, %d other answers or errors", ok, bad)
	} else {
		t.Logf("good traffic: %d business requests answered 200", ok)
	}
	// Two evaluations of the alerts on the recorded values.
	time.Sleep(2500 * time.Millisecond)
	if a := prom.alerts(t); len(a) != 0 {
		t.Errorf("alerts after good traffic only: %+v, want none", a)
	}

	// The flood: tokens with the sidecar's kid signed by another key, from
	// two clients, until both token alerts fire.
	forged := forge(t, jwts[0])
	flood := traffic(sc.base, []string{forged, forged}, 401)
	floodStart := time.Now()
	want := []string{"AuthsidecarHighAuthFailureRatio", "AuthsidecarTokenMismatch"}
	pendingAt, firingAt := map[string]time.Duration{}, map[string]time.Duration{}
	var last []promAlert
	for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline) && len(firingAt) < len(want); time.Sleep(200 * time.Millisecond) {
		last = prom.alerts(t)
		for _, a := range last {
			name := a.Labels["alertname"]
			switch {
			case a.State == "pending" && pendingAt[name] == 0:
				pendingAt[name] = time.Since(floodStart)
			case a.State == "firing" && firingAt[name] == 0:
				firingAt[name] = time.Since(floodStart)
			}
		}
	}
	refused, other := flood()
	t.Logf("flood: %d refused with 401, %d other answers or errors; pending after %v, firing after %v", refused, other, pendingAt, firingAt)
	if refused == 0 || other != 0 {
		t.Errorf("forged tokens: %d answers 401, %d other answers or errors", refused, other)
	}
	for _, name := range want {
		if firingAt[name] == 0 {
			t.Errorf("%s did not fire within 40s of the flood; alerts: %+v", name, last)
		}
	}
	for _, a := range last {
		name := a.Labels["alertname"]
		if !slices.Contains(want, name) {
			t.Errorf("%s is %s during a forged-token flood, want quiet: %+v", name, a.State, a)
		}
		if name == "AuthsidecarHighAuthFailureRatio" && a.Labels["reason"] != "bad_signature" {
			t.Errorf("%s for reason %q, want bad_signature", name, a.Labels["reason"])
		}
		if a.Labels["job"] != "authsidecar" {
			t.Errorf("%s has job %q, want authsidecar", name, a.Labels["job"])
		}
	}
	// An alert seen once and gone by the last poll is caught here.
	for name := range pendingAt {
		if _, ok := firingAt[name]; !ok && !slices.Contains(want, name) {
			t.Errorf("%s went pending during the flood, want quiet", name)
		}
	}
	for name := range firingAt {
		if !slices.Contains(want, name) {
			t.Errorf("%s fired during the flood, want quiet", name)
		}
	}

	t.Run("rules", func(t *testing.T) {
		var data struct {
			Groups []struct {
				Rules []struct {
					Name, Type, Health, LastError string
				}
			}
		}
		if err := prom.apiGet("/api/v1/rules", nil, &data); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, g := range data.Groups {
			for _, r := range g.Rules {
				n++
				if r.Health != "ok" {
					t.Errorf("%s rule %s: health %q %s", r.Type, r.Name, r.Health, r.LastError)
				}
			}
		}
		if n != len(records)+len(alertNames) {
			t.Errorf("prometheus loaded %d rules, the file has %d", n, len(records)+len(alertNames))
		}
		for _, rec := range records {
			s, err := prom.query(rec)
			if err != nil || len(s) == 0 {
				t.Errorf("recording rule %s: no value (%v)", rec, err)
			}
		}
		checks := []struct {
			expr string
			ok   func(float64) bool
			want string
		}{
			{`job:authsidecar_requests:rate5m{job="authsidecar"}`, func(v float64) bool { return v > 1 }, "> 1"},
			{`job_reason:authsidecar_auth_failures:ratio_rate5m{reason="bad_signature"}`, func(v float64) bool { return v > 0.25 && v < 1 }, "in (0.25, 1)"},
			{`job_reason:authsidecar_auth_failures:ratio_rate5m{reason="expired"}`, func(v float64) bool { return v == 0 }, "0"},
			{`job:authsidecar_requests_5xx:ratio_rate5m`, func(v float64) bool { return v == 0 }, "0"},
			{`job:authsidecar_token_cache_hits:ratio_rate5m`, func(v float64) bool { return v > 0 && v < 1 }, "in (0, 1)"},
			{`job:authsidecar_signins_rate_limited:ratio_rate5m`, func(v float64) bool { return v == 0 }, "0"},
			{`job_class:authsidecar_request_duration_seconds:p99_5m{class="business"}`, func(v float64) bool { return v > 0 && v < 1 }, "in (0, 1) s"},
		}
		for _, c := range checks {
			s, err := prom.query(c.expr)
			if err != nil || len(s) != 1 || !c.ok(s[0].Value) {
				t.Errorf("%s: got %v (%v), want one value %s", c.expr, s, err, c.want)
				continue
			}
			t.Logf("%s = %.4g", c.expr, s[0].Value)
		}
	})

	t.Run("dashboard", func(t *testing.T) {
		exprs, vars := dashboardQueries(t, dashboardFile)
		if len(exprs) < 15 {
			t.Fatalf("only %d queries found in %s: is the walk broken?", len(exprs), dashboardFile)
		}
		exprs = append(exprs, vars...)
		for _, e := range exprs {
			q := grafanaSubst.Replace(e)
			sels, err := parseSelectors(q)
			if err != nil {
				t.Errorf("%s: %v", e, err)
				continue
			}
			for _, s := range sels {
				if !exported[s.name] && !slices.Contains(scrapeMade, s.name) {
					t.Errorf("%s reads %s: the binary's /metrics does not export it", e, s.name)
				}
			}
			res, err := prom.query(q)
			if err != nil {
				t.Errorf("dashboard query: %v", err)
			} else if len(res) == 0 {
				t.Errorf("dashboard query %s: no data after traffic", q)
			}
		}
	})
	t.Logf("total %s", time.Since(start).Round(time.Millisecond))
}

// grafanaSubst fills Grafana's variables the way Grafana would for this
// test's one job and instance, the "All" value being the regex ".+".
var grafanaSubst = strings.NewReplacer(
	"$__rate_interval", "1m",
	"$__interval", "1m",
	"$__range", "1m",
	"$job", ".+",
	"$instance", ".+",
)

// labelValues is a Grafana template query; the series selector inside is
// run as count by (label) (selector).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\)$`)

// dashboardQueries returns every target expression of the dashboard's
// panels (those inside rows included) and its template variables' label
// queries rewritten as PromQL.
func dashboardQueries(t *testing.T, path string) (exprs, vars []string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		ID      int
		Type    string
		Title   string
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		}
		Panels []json.RawMessage
	}
	var dash struct {
		Panels     []json.RawMessage
		Templating struct {
			List []struct {
				Name, Type string
				Query      json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	ids := map[int]bool{}
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, r := range ps {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("%s: panel: %v", path, err)
			}
			if ids[p.ID] {
				t.Errorf("%s: panel id %d used twice", path, p.ID)
			}
			ids[p.ID] = true
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", path, p.Title)
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("%s: panel %q target %s has no expr", path, p.Title, tg.RefID)
				}
				exprs = append(exprs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("%s: variable %s: %v", path, v.Name, err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("%s: variable %s: query %q is not label_values(selector, label)", path, v.Name, q.Query)
		}
		vars = append(vars, fmt.Sprintf("count by (%s) (%s)", m[2], m[1]))
	}
	return exprs, vars
}
