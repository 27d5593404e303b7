package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/pgtest"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// These tests run the built binary as replicas behind one base_url on one
// real PostgreSQL, and stop the database under a running sidecar.

// replicaConfig writes a postgres config for one replica. Every replica
// shares base_url (the load balancer's), AUTH_SECRET and the database.
func replicaConfig(t *testing.T, dir, name, upstream, extra string) (path string, port int) {
	t.Helper()
	return writeConfigFile(t, dir, name, fmt.Sprintf(`base_url: "http://app.example.test"
upstream: %q
database: { driver: postgres, max_conns: 4 }
keys: { cooldown: 1s }
limits: { signin_per_ip: "off", signup_per_ip: "off", signin_per_email: "3/m", mail_per_ip: "off", mail_per_email: "off" }
%s`, upstream, extra))
}

func pgEnv(url string) []string {
	return []string{"AUTH_SECRET=" + e2eSecret, "DATABASE_URL=" + url}
}

// startReplicas launches n replicas at the same moment on one database,
// with extra added to each config and env to each environment.
func startReplicas(t *testing.T, n int, url, upstream, extra string, env ...string) []*process {
	t.Helper()
	dir := t.TempDir()
	ps := make([]*process, n)
	for i := range ps {
		cfg, port := replicaConfig(t, dir, fmt.Sprintf("replica%d.yaml", i), upstream, extra)
		p, err := launch(t, cfg, port, append(pgEnv(url), env...)...)
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	for _, p := range ps {
		if err := p.waitListening(30 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return ps
}

func TestReplicasOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	up := echoUpstream(t)
	rs := startReplicas(t, 3, url, up.URL, "")
	a, b, c := rs[0].instance, rs[1].instance, rs[2].instance

	// Three replicas started together on an empty database made one key.
	db, err := sqlstore.OpenPostgres(context.Background(), sqlstore.PostgresOptions{URL: url, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n, err := db.Count(context.Background(), "jwks"); err != nil || n != 1 {
		t.Fatalf("signing keys after a simultaneous start of 3 replicas: got %d (%v), want 1", n, err)
	}
	_, jwksA := a.do(t, "GET", "/api/auth/jwks", "")
	for _, s := range []*instance{b, c} {
		if _, j := s.do(t, "GET", "/api/auth/jwks", ""); !bytes.Equal(j, jwksA) {
			t.Fatalf("JWKS differs between replicas:\n%s\n%s", jwksA, j)
		}
	}

	// Sign up on A, sign in on B, get-session on A with B's cookie.
	signUp(t, a, "ann@example.com", "correct-horse-battery")
	res, body := b.do(t, "POST", "/api/auth/sign-in/email", `{"email":"ann@example.com","password":"correct-horse-battery"}`)
	if res.StatusCode != 200 || len(res.Cookies()) != 1 {
		t.Fatalf("sign-in on B: got %d %s", res.StatusCode, body)
	}
	cookie := res.Cookies()[0].Name + "=" + res.Cookies()[0].Value
	jwt := getJWT(t, a, cookie)
	for i, s := range rs {
		if got := status(t, s.instance, "/api/tasks", jwt); got != 200 {
			t.Errorf("replica %d: JWT from A got %d, want 200", i, got)
		}
	}

	// A role granted or revoked with the CLI applies on every replica at
	// the next admin request.
	cfgPath, _ := replicaConfig(t, t.TempDir(), "cli.yaml", up.URL, "")
	env := map[string]string{"AUTH_SECRET": e2eSecret, "DATABASE_URL": url}
	checkAdmin := func(want int) {
		t.Helper()
		for i, s := range rs {
			if got := status(t, s.instance, "/api/admin/users", jwt); got != want {
				t.Errorf("replica %d admin route: got %d, want %d", i, got, want)
			}
		}
	}
	checkAdmin(403)
	cliWithEnv(t, env, argv(cfgPath, "roles grant", "ann@example.com", "admin")...)
	checkAdmin(200)
	cliWithEnv(t, env, argv(cfgPath, "roles revoke", "ann@example.com", "admin")...)
	checkAdmin(403)

	// keys rotate while they run: the new key signs once it has been
	// published longer than keys.cooldown (1s here, plus 5s), and is then
	// accepted everywhere at first sight; old JWTs keep passing.
	cliWithEnv(t, env, argv(cfgPath, "keys rotate")...)
	var fresh string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if fresh = getJWT(t, b, cookie); kidOf(t, fresh) != kidOf(t, jwt) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("get-session never signed with the rotated-in key")
		}
	}
	for i, s := range rs {
		if got := status(t, s.instance, "/api/tasks", fresh); got != 200 {
			t.Errorf("replica %d: the first JWT signed with the rotated-in key got %d, want 200", i, got)
		}
		if got := status(t, s.instance, "/api/tasks", jwt); got != 200 {
			t.Errorf("replica %d: JWT from before the rotation got %d, want 200", i, got)
		}
	}

	// Sign-out on B ends the session on A at once.
	if res, body := b.do(t, "POST", "/api/auth/sign-out", "", "Cookie", cookie, "Origin", "http://app.example.test"); res.StatusCode != 200 {
		t.Fatalf("sign-out on B: got %d %s", res.StatusCode, body)
	}
	if res, body := a.do(t, "GET", "/api/auth/get-session", "", "Cookie", cookie); res.StatusCode != 200 || strings.TrimSpace(string(body)) != "null" || res.Header.Get("Set-Auth-Jwt") != "" {
		t.Errorf("get-session on A after sign-out on B: got %d %s jwt=%q, want null and no JWT", res.StatusCode, body, res.Header.Get("Set-Auth-Jwt"))
	}

	// limits.signin_per_email (3/m) holds across replicas: guesses spread
	// over three replicas get three tries in all, not three each. (An
	// email nobody has tried yet: ann's sign-in above took a token too.)
	var codes []int
	for i := range 5 {
		res, _ := rs[i%3].do(t, "POST", "/api/auth/sign-in/email", `{"email":"carol@example.com","password":"wrong-guess-123"}`)
		codes = append(codes, res.StatusCode)
	}
	if fmt.Sprint(codes) != "[401 401 401 429 429]" {
		t.Errorf("wrong-password sign-ins spread over replicas: got %v, want [401 401 401 429 429]", codes)
	}

	// The same email signed up concurrently on every replica: exactly one
	// 200, the others 422 USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL, no 500.
	var wg sync.WaitGroup
	results := make([]string, 9)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, body := rs[i%3].do(t, "POST", "/api/auth/sign-up/email", `{"name":"R","email":"race@example.com","password":"correct-horse-battery"}`)
			results[i] = fmt.Sprintf("%d %s", res.StatusCode, jsonCode(body))
		}()
	}
	wg.Wait()
	ok, taken := 0, 0
	for _, r := range results {
		switch r {
		case "200 ":
			ok++
		case "422 USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL":
			taken++
		default:
			t.Errorf("concurrent sign-up: got %q, want 200 or 422 USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL", r)
		}
	}
	if ok != 1 || taken != len(results)-1 {
		t.Errorf("concurrent sign-ups of one email: %d succeeded and %d were refused, want 1 and %d (%v)", ok, taken, len(results)-1, results)
	}
}

// TestReplicaKilledDuringSignUps: kill -9 of one replica during a sign-up
// storm; every sign-up that was answered 200 signs in on the other.
func TestReplicaKilledDuringSignUps(t *testing.T) {
	url := pgtest.URL(t)
	up := echoUpstream(t)
	rs := startReplicas(t, 2, url, up.URL, "")
	var (
		mu    sync.Mutex
		acked []string
		seq   atomic.Int64
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	client := &http.Client{Timeout: 10 * time.Second}
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				email := fmt.Sprintf("storm%d@example.com", seq.Add(1))
				body := fmt.Sprintf(`{"name":"S","email":%q,"password":"correct-horse-battery"}`, email)
				res, err := client.Post(rs[w%2].base+"/api/auth/sign-up/email", "application/json", strings.NewReader(body))
				if err != nil {
					continue // the killed replica: not acknowledged
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode == 200 {
					mu.Lock()
					acked = append(acked, email)
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	rs[0].kill()
	time.Sleep(1000 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if len(acked) < 4 {
		t.Fatalf("only %d sign-ups acknowledged: the storm did not run", len(acked))
	}
	for _, email := range acked {
		res, body := rs[1].do(t, "POST", "/api/auth/sign-in/email", fmt.Sprintf(`{"email":%q,"password":"correct-horse-battery"}`, email))
		if res.StatusCode != 200 {
			t.Errorf("acknowledged sign-up %s: sign-in on the surviving replica got %d %s", email, res.StatusCode, body)
		}
	}
	t.Logf("%d acknowledged sign-ups (of %d attempted) all sign in after kill -9 of one replica", len(acked), seq.Load())
}

// TestPostgresOutage stops PostgreSQL under a running sidecar: business
// routes keep serving, auth, admin and cookie-only requests get 503 JSON
// within 5 s, /readyz fails; when the server returns, the sidecar recovers
// by itself.
func TestPostgresOutage(t *testing.T) {
	cluster := pgtest.Start(t)
	url := cluster.URL()
	up := echoUpstream(t)
	cfg, port := replicaConfig(t, t.TempDir(), "outage.yaml", up.URL, "")
	p := startBinary(t, cfg, port, pgEnv(url)...)
	s := p.instance
	cookie, jwt := signUp(t, s, "ann@example.com", "correct-horse-battery")
	cliWithEnv(t, map[string]string{"AUTH_SECRET": e2eSecret, "DATABASE_URL": url}, argv(cfg, "roles grant", "ann@example.com", "admin")...)
	if got := status(t, s, "/api/admin/x", jwt); got != 200 {
		t.Fatalf("admin route before the outage: got %d", got)
	}

	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := status(t, s, "/api/tasks", jwt); got != 200 {
		t.Errorf("business route with PostgreSQL down: got %d, want 200 (keys are in memory)", got)
	}
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      []string
	}{
		{"sign-in", "POST", "/api/auth/sign-in/email", `{"email":"ann@example.com","password":"correct-horse-battery"}`, nil},
		{"get-session", "GET", "/api/auth/get-session", "", []string{"Cookie", cookie}},
		{"admin", "GET", "/api/admin/x", "", []string{"Authorization", "Bearer " + jwt}},
		{"cookie-only", "GET", "/api/mcp-oauth/authorize", "", []string{"Cookie", cookie}},
	} {
		start := time.Now()
		res, body := s.do(t, tc.method, tc.path, tc.body, tc.hdr...)
		took := time.Since(start)
		if res.StatusCode != 503 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || !json.Valid(body) {
			t.Errorf("%s with PostgreSQL down: got %d %q %s, want 503 JSON", tc.name, res.StatusCode, res.Header.Get("Content-Type"), body)
		}
		if took > 5*time.Second {
			t.Errorf("%s with PostgreSQL down took %v, want at most 5s", tc.name, took)
		}
		t.Logf("%s with PostgreSQL down: %d in %v", tc.name, res.StatusCode, took.Round(time.Millisecond))
	}
	if res, _ := http.Get(p.metrics + "/readyz"); res == nil || res.StatusCode != 503 {
		t.Errorf("/readyz with PostgreSQL down: got %v, want 503", res)
	}

	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	for {
		res, _ := s.do(t, "POST", "/api/auth/sign-in/email", `{"email":"ann@example.com","password":"correct-horse-battery"}`)
		if res.StatusCode == 200 {
			break
		}
		if time.Since(back) > 20*time.Second {
			t.Fatalf("no recovery 20s after PostgreSQL returned: sign-in still %d", res.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("sign-in recovered %v after PostgreSQL was back", time.Since(back).Round(time.Millisecond))
	if res, _ := http.Get(p.metrics + "/readyz"); res == nil || res.StatusCode != 200 {
		t.Errorf("/readyz after recovery: got %v, want 200", res)
	}
	if got := status(t, s, "/api/admin/x", jwt); got != 200 {
		t.Errorf("admin route after recovery: got %d, want 200", got)
	}
	if strings.Contains(p.stderr.String(), urlPassword(t, url)) {
		t.Error("the sidecar's log shows the database password")
	}
}

// urlPassword is the password in a postgres:// URL.
func urlPassword(t *testing.T, raw string) string {
	t.Helper()
	u, err := neturl.Parse(raw)
	pw, ok := "", false
	if err == nil && u.User != nil {
		pw, ok = u.User.Password()
	}
	if !ok || pw == "" {
		t.Fatalf("test database URL has no password")
	}
	return pw
}

// TestAdminCLIOnPostgres: check, keys, roles, users and db work with a
// postgres config; nothing prints the database password.
func TestAdminCLIOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	pw := urlPassword(t, url)
	up := echoUpstream(t)
	cfg, port := replicaConfig(t, t.TempDir(), "pg.yaml", up.URL, "")
	s := startBinary(t, cfg, port, pgEnv(url)...).instance
	signUp(t, s, "ann@example.com", "correct-horse-battery")
	signUp(t, s, "bob@example.com", "correct-horse-battery")
	env := map[string]string{"AUTH_SECRET": e2eSecret, "DATABASE_URL": url}

	var all strings.Builder
	step := func(stdin string, args ...string) string {
		t.Helper()
		out, errOut, err := runWithEnv(env, stdin, args...)
		all.WriteString(out + errOut)
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, errOut)
		}
		return out
	}
	if out := step("", argv(cfg, "check")...); !strings.Contains(out, "ok    database postgres://127.0.0.1:") || !strings.Contains(out, "all checks passed") {
		t.Errorf("check: got %q", out)
	}
	if users := userRows(t, step("", argv(cfg, "users list")...)); len(users) != 2 || users["ann@example.com"][3] != "1" {
		t.Errorf("users list: got %v, want ann and bob with a live session each", users)
	}
	if keys := keyRows(t, step("", argv(cfg, "keys list")...)); len(keys) != 1 {
		t.Errorf("keys list: got %v, want the one key", keys)
	}
	step("new-password-123\n", argv(cfg, "users set-password", "ann@example.com")...)
	if res, _ := s.do(t, "POST", "/api/auth/sign-in/email", `{"email":"ann@example.com","password":"new-password-123"}`); res.StatusCode != 200 {
		t.Errorf("sign-in with the password set by the CLI: got %d", res.StatusCode)
	}
	if out := step("", argv(cfg, "users delete", "bob@example.com")...); !strings.Contains(out, "bob@example.com") {
		t.Errorf("users delete: got %q", out)
	}
	if users := userRows(t, step("", argv(cfg, "users list")...)); len(users) != 1 {
		t.Errorf("users list after delete: got %v, want ann alone", users)
	}

	// db backup is SQLite's; it says what to use instead.
	_, _, err := runWithEnv(env, "", argv(cfg, "db backup", filepath.Join(t.TempDir(), "b.db"))...)
	if err == nil || !strings.Contains(err.Error(), "pg_dump") {
		t.Errorf("db backup on postgres: got %v, want a pointer to pg_dump", err)
	}
	all.WriteString(fmt.Sprint(err))
	// A missing URL variable fails check and serve with a clear message.
	noURL := map[string]string{"AUTH_SECRET": e2eSecret}
	for _, cmd := range []string{"check", "serve", "users list"} {
		_, _, err := runWithEnv(noURL, "", argv(cfg, cmd)...)
		if err == nil || !strings.Contains(err.Error(), "$DATABASE_URL is not set") {
			t.Errorf("%s without DATABASE_URL: got %v, want a clear refusal", cmd, err)
		}
	}
	// A wrong password fails clearly, without printing either password.
	bad := strings.Replace(url, pw, "wrong-"+pw, 1)
	_, _, err = runWithEnv(map[string]string{"AUTH_SECRET": e2eSecret, "DATABASE_URL": bad}, "", argv(cfg, "check")...)
	if err == nil || !strings.Contains(err.Error(), "postgres://127.0.0.1:") {
		t.Errorf("check with a wrong password: got %v, want a connection error naming the server", err)
	}
	all.WriteString(fmt.Sprint(err))
	if strings.Contains(all.String(), pw) {
		t.Errorf("CLI output shows the database password:\n%s", all.String())
	}
}

// TestVerifierOnIssuersPostgres: a verifier given the issuers' database
// serves cookie-only and admin routes as full mode does, while still
// taking its keys from the JWKS URL and serving no /api/auth/*. The query
// counter shows the database work by class: none for business requests.
func TestVerifierOnIssuersPostgres(t *testing.T) {
	url := pgtest.URL(t)
	up := echoUpstream(t)
	dir := t.TempDir()
	issuerCfg, issuerPort := replicaConfig(t, dir, "issuer.yaml", up.URL, "")
	iss := startBinary(t, issuerCfg, issuerPort, pgEnv(url)...)
	cookie, jwt := signUp(t, iss.instance, "ann@example.com", "correct-horse-battery")
	cliWithEnv(t, map[string]string{"DATABASE_URL": url}, argv(issuerCfg, "roles grant", "ann@example.com", "admin")...)

	vcfg, vport := writeConfigFile(t, dir, "verifier.yaml", fmt.Sprintf(`mode: verifier
base_url: "http://app.example.test"
upstream: %q
database: { driver: postgres }
keys: { jwks_url: "%s/api/auth/jwks" }
auth: { issuer: "http://app.example.test" }
routes:
  cookie_only: [/api/mcp-oauth/authorize]
  admin: [{ prefix: /api/admin/, roles: [admin] }]
`, up.URL, iss.base))
	v := startBinary(t, vcfg, vport, pgEnv(url)...)
	if got := status(t, v.instance, "/api/admin/users", jwt); got != 200 {
		t.Errorf("verifier admin route with the role: got %d, want 200", got)
	}
	res, body := v.do(t, "GET", "/api/mcp-oauth/authorize", "", "Cookie", cookie)
	var seen map[string]string
	if json.Unmarshal(body, &seen); res.StatusCode != 200 || seen["user"] == "" {
		t.Errorf("verifier cookie-only route with the issuer's cookie: got %d %s, want 200 with the user", res.StatusCode, body)
	}
	if res, _ := v.do(t, "GET", "/api/mcp-oauth/authorize", ""); res.StatusCode != 401 {
		t.Errorf("verifier cookie-only route without a cookie: got %d, want 401", res.StatusCode)
	}
	cliWithEnv(t, map[string]string{"DATABASE_URL": url}, argv(issuerCfg, "roles revoke", "ann@example.com", "admin")...)
	if got := status(t, v.instance, "/api/admin/users", jwt); got != 403 {
		t.Errorf("verifier admin route after revoke: got %d, want 403", got)
	}
	if res, _ := v.do(t, "POST", "/api/auth/sign-in/email", `{"email":"ann@example.com","password":"correct-horse-battery"}`); res.StatusCode != 404 {
		t.Errorf("verifier sign-in: got %d, want 404 (the issuer's route)", res.StatusCode)
	}
	for range 5 {
		status(t, v.instance, "/api/tasks", jwt)
	}
	res, err := http.Get(v.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var m strings.Builder
	bodyTo(&m, res)
	// Two admin requests, one role query each; one cookie-only request
	// carried a cookie (the one without is refused before any lookup).
	for _, want := range []string{`authsidecar_db_queries_total{class="admin"} 2`, `authsidecar_db_queries_total{class="cookie_only"} 1`} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("verifier /metrics: no %s", want)
		}
	}
	if strings.Contains(m.String(), `authsidecar_db_queries_total{class="business"}`) && !strings.Contains(m.String(), `authsidecar_db_queries_total{class="business"} 0`) {
		t.Error("business requests made database queries")
	}
}
