package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/demoidp"
	"github.com/authsidecar/authsidecar/sidecar"
	"github.com/authsidecar/authsidecar/webclient"
)

// cmdDemo runs the sidecar for a newcomer: a temporary database, a
// generated development secret, and a built-in echo upstream that shows
// what it received (X-User-Id included). It prints the whole flow as
// ready-to-paste curl commands. With -config, the demo starts from that
// file (its listen, metrics.listen, routes, limits, ...) and replaces only
// what a demo must own: mode, database, upstream, mail and base_url.
func cmdDemo(ctx context.Context, e *cliEnv, args []string) error {
	if err := noArgs("demo", args); err != nil {
		return err
	}
	cfg := config.Default()
	if e.configSet {
		var err error
		if cfg, err = config.Load(e.configPath); err != nil {
			return err
		}
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

	ln, metricsAddr, err := demoListeners(cfg, e.configSet)
	if err != nil {
		return err
	}
	cfg.Mode = config.ModeFull
	cfg.Listen = ln.Addr().String()
	cfg.BaseURL = "http://" + cfg.Listen
	cfg.Upstream = "http://" + upLn.Addr().String()
	cfg.Database = config.Default().Database
	cfg.Database.Path = filepath.Join(dir, "demo.db")
	cfg.Keys.JWKSURL, cfg.Keys.JWKSCAFile = "", ""
	cfg.Metrics.Listen = metricsAddr
	if !e.configSet {
		cfg.Log.Format = config.FormatText
	}
	// Reset and verification mails go to the log, links and all: the
	// demo page's "forgot password" is followed from there.
	cfg.Email = config.Default().Email
	cfg.Email.Delivery = config.DeliveryLog
	// "Sign in with a demo IdP": a small OpenID provider of the demo's own.
	idpURL, stopIdP, err := startDemoIdP(cfg.BaseURL + "/api/auth/callback/" + demoProvider)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopIdP()
	cfg.IdentityProviders = append(slices.DeleteFunc(cfg.IdentityProviders, func(p config.IdentityProvider) bool { return p.ID == demoProvider }),
		config.IdentityProvider{ID: demoProvider, Kind: config.KindOIDC, Issuer: idpURL, ClientID: demoidp.ClientID})
	// The demo page's "verify email" shows the link signing its reader in
	// (off by default: docs/limits.md says why). Its users are the person
	// trying the demo, on a throwaway database.
	cfg.Auth.SignInAfterVerification = true
	if err := cfg.Validate(); err != nil {
		ln.Close()
		return fmt.Errorf("demo config: %w", err)
	}
	var raw [32]byte
	rand.Read(raw[:])
	secret := config.NewSecret("demo-only-" + base64.RawURLEncoding.EncodeToString(raw[:]))

	s, err := sidecar.New(ctx, sidecar.Options{
		Config: cfg, Secret: secret, Getenv: e.getenv, Log: e.stderr, Listener: ln,
		OnReady: func() { fmt.Fprint(e.stdout, demoText(cfg.BaseURL, metricsAddr, cfg.Database.Path, idpURL)) },
	})
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// demoProvider is the demo IdP's id: sign-in/social {"provider":"demo"}.
const demoProvider = "demo"

// startDemoIdP serves the demo's OpenID provider on a free loopback port,
// sending codes only to redirectURI.
func startDemoIdP(redirectURI string) (issuer string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("demo idp: %w", err)
	}
	issuer = "http://" + ln.Addr().String()
	p, err := demoidp.New(issuer, redirectURI)
	if err != nil {
		ln.Close()
		return "", nil, err
	}
	srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return issuer, func() { srv.Close() }, nil
}

// demoListeners binds the demo's public listener and picks its admin
// address. Without a config file: 127.0.0.1:8080 when free, else any port
// (the demo must start), and any port for the admin listener. With one:
// exactly the file's listen and metrics.listen.
func demoListeners(cfg config.Config, fromFile bool) (net.Listener, string, error) {
	if fromFile {
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return nil, "", fmt.Errorf("demo listen %s: %w", cfg.Listen, err)
		}
		return ln, cfg.Metrics.Listen, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:8080")
	if err != nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, "", fmt.Errorf("demo listen: %w", err)
		}
	}
	metricsLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ln.Close()
		return nil, "", fmt.Errorf("demo metrics: %w", err)
	}
	addr := metricsLn.Addr().String()
	metricsLn.Close()
	return ln, addr, nil
}

func demoText(base, metrics, db, idp string) string {
	return strings.NewReplacer("$BASE", base, "$METRICS", metrics, "$DB", db, "$IDP", idp).Replace(`
authsidecar demo is running on $BASE
  database:  $DB (temporary, removed on exit)
  secret:    generated for this demo only: DEVELOPMENT USE ONLY, never reuse it
  upstream:  a built-in echo server that answers with what it received
  metrics:   http://$METRICS/metrics  (health: /healthz, /readyz)
  demo IdP:  $IDP  (an OpenID provider: "Sign in with a demo IdP" on the page)

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

  # 7. sign in with the demo IdP: "url" is its login page (open it in a browser)
  curl -s -c idp-jar -H 'content-type: application/json' -d '{"provider":"demo","callbackURL":"/"}' $S/api/auth/sign-in/social

Press Ctrl-C to stop.
`)
}

// demoUpstream is the demo's app: the demo page at GET / (served through
// the sidecar, so the page and /api/auth are one origin), a WebSocket echo
// under /ws/, and the JSON echo for everything else.
func demoUpstream() http.Handler { return webclient.DemoApp("authsidecar demo echo") }
