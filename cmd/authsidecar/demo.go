package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/webclient"
)

// cmdDemo runs the sidecar for a newcomer: a temporary database, a
// generated development secret, and a built-in echo upstream that shows
// what it received (X-User-Id included). It prints the whole flow as
// ready-to-paste curl commands.
func cmdDemo(ctx context.Context, e *cliEnv, args []string) error {
	if err := noArgs("demo", args); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "authsidecar-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer os.RemoveAll(dir)

	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("demo upstream: %w", err)
	}
	upstream := &http.Server{Handler: demoUpstream(), ReadHeaderTimeout: 5 * time.Second}
	go upstream.Serve(upLn)
	defer upstream.Close()

	// 8080 when free, else any port: the demo must start.
	ln, err := net.Listen("tcp", "127.0.0.1:8080")
	if err != nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return fmt.Errorf("demo listen: %w", err)
		}
	}
	metricsLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("demo metrics: %w", err)
	}
	metricsAddr := metricsLn.Addr().String()
	metricsLn.Close()

	cfg := config.Default()
	cfg.Listen = ln.Addr().String()
	cfg.BaseURL = "http://" + cfg.Listen
	cfg.Upstream = "http://" + upLn.Addr().String()
	cfg.Database.Path = filepath.Join(dir, "demo.db")
	cfg.Metrics.Listen = metricsAddr
	cfg.Log.Format = config.FormatText
	// Reset and verification mails go to the log, links and all: the
	// demo page's "forgot password" is followed from there.
	cfg.Email.Delivery = "log"
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("demo config: %w", err)
	}
	var raw [32]byte
	rand.Read(raw[:])
	secret := config.NewSecret("demo-only-" + base64.RawURLEncoding.EncodeToString(raw[:]))

	out := newBufferedLog(e.stderr)
	defer out.Close()
	return serve(ctx, cfg, secret, e.getenv, newLogs(cfg.Log, out), ln, serveHooks{onReady: func() {
		fmt.Fprint(e.stdout, demoText(cfg.BaseURL, metricsAddr, cfg.Database.Path))
	}})
}

func demoText(base, metrics, db string) string {
	return strings.NewReplacer("$BASE", base, "$METRICS", metrics, "$DB", db).Replace(`
authsidecar demo is running on $BASE
  database:  $DB (temporary, removed on exit)
  secret:    generated for this demo only: DEVELOPMENT USE ONLY, never reuse it
  upstream:  a built-in echo server that answers with what it received
  metrics:   http://$METRICS/metrics  (health: /healthz, /readyz)

Open $BASE/ in a browser for the demo page, or paste these into another shell:

  S=$BASE

  # 1. sign up (sets the session cookie, no JWT yet)
  curl -s -c jar -H 'content-type: application/json' \
    -d '{"name":"Ann","email":"ann@example.com","password":"correct-horse-battery"}' $S/api/auth/sign-up/email

  # 2. sign in (the same cookie again; still no JWT: login takes two steps)
  curl -s -c jar -H 'content-type: application/json' \
    -d '{"email":"ann@example.com","password":"correct-horse-battery"}' $S/api/auth/sign-in/email

  # 3. get-session: the JWT arrives in the set-auth-jwt header
  JWT=$(curl -s -b jar -D - -o /dev/null $S/api/auth/get-session | awk 'tolower($1)=="set-auth-jwt:"{print $2}' | tr -d '\r')
  echo "$JWT" | cut -d. -f2 | tr '_-' '/+' | base64 -d 2>/dev/null; echo

  # 4. a business call with the Bearer token: the echo shows X-User-Id
  curl -s -H "Authorization: Bearer $JWT" $S/api/tasks

  # 5. the same call without it: 401
  curl -s -i $S/api/tasks

  # 6. forgot password: the link appears in this log as msg=mail ... url="..."
  curl -s -H 'content-type: application/json' -d '{"email":"ann@example.com"}' $S/api/auth/request-password-reset

Press Ctrl-C to stop.
`)
}

// demoUpstream is the demo's app: the demo page at GET / (served through
// the sidecar, so the page and /api/auth are one origin), a WebSocket echo
// under /ws/, and the JSON echo for everything else.
func demoUpstream() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", webclient.DemoPage())
	mux.Handle("/ws/", webclient.EchoWebSocket())
	mux.HandleFunc("/", echo)
	return mux
}

// echo is the demo upstream: it answers with the request it received.
var echo = echoAs("authsidecar demo echo")

// echoAs is an echo upstream that says name in its answers, so a walk
// through several upstreams shows which one answered.
func echoAs(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { echoRequest(w, r, name) }
}

func echoRequest(w http.ResponseWriter, r *http.Request, name string) {
	io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	headers := map[string]string{}
	names := make([]string, 0, len(r.Header))
	for name := range r.Header {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		headers[name] = strings.Join(r.Header.Values(name), ", ")
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(struct {
		Upstream string            `json:"upstream"`
		Method   string            `json:"method"`
		Path     string            `json:"path"`
		UserID   string            `json:"x_user_id"`
		Headers  map[string]string `json:"headers"`
	}{name, r.Method, r.URL.Path, r.Header.Get("X-User-Id"), headers})
}
