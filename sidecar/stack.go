package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/idp"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/proxy"
	"github.com/authsidecar/authsidecar/revocation"
	"github.com/authsidecar/authsidecar/sqlstore"
	"github.com/authsidecar/authsidecar/webclient"
)

// stack is the wired request path: the issuer behind /api/auth, the key
// cache the verifier reads, and the proxy in front of both. What a config
// reload may change lives in a generation, swapped whole; the rest (the
// store, the issuer, the metrics, the upstream connection pool) is built
// once and shared.
type stack struct {
	// handler serves each request with the generation current when the
	// request arrived: it finishes on that one even if a reload swaps
	// another in meanwhile.
	handler http.Handler
	issuer  *issuer.Issuer // the first generation's; keys are shared

	secret  config.Secret
	db      *sqlstore.DB
	lg      logs
	metrics *proxy.Metrics
	tokens  *proxy.TokenCacheMetrics // nil: cache.verified_tokens is 0
	// revMetrics counts what every revocation syncer of the process reads.
	revMetrics *revocation.Metrics
	transport  http.RoundTripper
	upstream   *url.URL
	// getenv reads the identity providers' client secrets, at start and
	// on each reload.
	getenv func(string) string
	idpm   *idp.Metrics
	// legacy carries lazy migration's calls (migration.legacy_signin),
	// whichever generation makes them.
	legacy http.RoundTripper
	// idps is the identity providers in force (full mode; empty in
	// verifier mode), swapped with the generation under mu.
	idps *idp.Set

	// mu orders apply and close: a reload that ends after close must not
	// put in force a key cache nobody would close.
	mu      sync.Mutex
	closed  bool
	current atomic.Pointer[generation]
}

// generation is one config's request handling, immutable once built.
type generation struct {
	handler http.Handler
	ver     *verification
}

// keys returns the key cache in force.
func (st *stack) keys() *proxy.KeyCache { return st.current.Load().ver.keys }

// buildStack wires issuer (full mode), key cache, verifier and proxy from
// the config. db is nil in verifier mode without a database. In full mode
// the key set is loaded before it returns, so the first request finds it;
// a verifier starts even while its JWKS URL is down (its business routes
// answer 503 KEYS_UNAVAILABLE and /readyz fails until a fetch succeeds).
// mw, when not nil, is the outbox's box and worker (email.delivery not off).
func buildStack(ctx context.Context, cfg config.Config, secret config.Secret, db *sqlstore.DB, lg logs, reg prometheus.Registerer, mw *mailWiring, getenv func(string) string) (*stack, error) {
	log := lg.log
	upstream, err := url.Parse(cfg.Upstream)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	st := &stack{
		secret: secret, db: db, lg: lg, metrics: proxy.NewMetrics(reg), upstream: upstream,
		transport: proxy.NewUpstream(proxy.UpstreamOptions{
			ResponseHeaderTimeout: cfg.Proxy.ResponseHeaderTimeout.D(),
			MaxConns:              cfg.Proxy.UpstreamMaxConns, MaxPending: cfg.Proxy.UpstreamMaxPending,
			MaxConnsPerClient: clientShare(cfg.Proxy),
		}),
		getenv: getenv, idpm: idp.NewMetrics(reg),
		legacy: http.DefaultTransport.(*http.Transport).Clone(),
	}
	// Identity providers read nothing here: discovery and keys come in
	// the background, so a provider that is down delays no start.
	pcs, err := providerConfigs(cfg, getenv)
	if err != nil {
		return nil, err
	}
	if st.idps, err = idp.NewSet(pcs, idpOptions(cfg, log, st.idpm)); err != nil {
		return nil, err
	}
	// The gauges read the generation in force at scrape time; the registry
	// is served only once buildStack has returned one.
	proxy.RegisterKeyCache(reg, st.keys)
	if cfg.Cache.VerifiedTokens > 0 {
		st.tokens = proxy.NewTokenCacheMetrics(reg, func() int { return proxy.CachedTokens(st.current.Load().ver.verifier) })
	}
	st.revMetrics = revocation.NewMetrics(reg, func() int {
		if r := st.current.Load().ver.revs; r != nil {
			return r.set.Len()
		}
		return 0
	}, nil)
	var src proxy.KeySource
	if cfg.Verifier() {
		if src, err = jwksSource(cfg, log); err != nil {
			return nil, err
		}
	} else {
		src = &issuerKeys{}
	}
	ver, err := st.newVerification(cfg, src)
	if err != nil {
		return nil, err
	}
	built := false
	defer func() {
		if !built {
			ver.keys.Close() // stops a background retry a failed Load started
			ver.revs.stop()
			st.idps.Close()
		}
	}()
	if cfg.Verifier() {
		if err := ver.keys.Load(ctx); err != nil {
			log.Warn("JWKS not reachable at start: business routes answer 503 KEYS_UNAVAILABLE until a fetch succeeds; retrying in the background",
				"jwks_url", cfg.Keys.JWKSURL, "error", err.Error())
		}
		if ver.revs == nil {
			log.Warn("keys.revocations_url is empty: tokens are never refused as revoked here, only when they expire (an issuer without a revocation feed, such as Better Auth)")
		} else {
			log.Info("reading revocations from the issuer's feed; business routes answer 503 REVOCATIONS_UNAVAILABLE until the first complete read", "revocations_url", ver.id.revocationsURL)
		}
		ver.revs.start()
	} else {
		ver.revs = st.newFullRevocations(cfg, db)
		opts := IssuerOptions(cfg, secret, db, log)
		opts.Registerer = reg
		if opts.BetterAuthCookie, err = betterAuthCookie(cfg, getenv); err != nil {
			return nil, err
		}
		opts.Providers = st.idps.Providers()
		if mw != nil {
			opts.Recovery.Sealer, opts.Recovery.Queued = mw.box, mw.worker.Queued
		}
		// A key the issuer creates reaches the verifier before any JWT it
		// signs. A full sidecar keeps this key cache for its lifetime: no
		// reloadable key changes its verificationID.
		opts.OnNewKey = func(k issuer.PublicKey) { ver.keys.Add(proxy.Key{KID: k.KID, Public: k.Key}) }
		opts.Accounts.Cutoffs = ver.revs.set
		iss, err := issuer.New(ctx, opts)
		if err != nil {
			return nil, err
		}
		src.(*issuerKeys).iss, st.issuer = iss, iss
		registerPasswordHashes(reg, db.PasswordFormats, log)
		if err := ver.keys.Load(ctx); err != nil {
			return nil, fmt.Errorf("load keys: %w", err)
		}
		// Every revocation in force before the first request: a replica
		// restarted after kill -9 judges no token before it has them all.
		if err := ver.revs.poller.Load(proxy.WithClass(ctx, proxy.ClassRevocation)); err != nil {
			return nil, err
		}
		ver.revs.start()
	}
	g, err := st.build(cfg, ver, st.idps)
	if err != nil {
		return nil, err
	}
	if cfg.Auth.BetterAuthSecretEnv != "" {
		log.Info("accepting Better Auth session cookies signed with the old secret: remove auth.better_auth_secret_env once the imported sessions have expired",
			"cookie", cfg.Auth.BetterAuthCookie, "secret_env", cfg.Auth.BetterAuthSecretEnv)
	}
	if u := cfg.Migration.LegacySignin.URL; u != "" && !cfg.Verifier() {
		log.Info("lazy migration on: a sign-in for an address the sidecar does not know asks the legacy application", "legacy_origin", origin(u))
	}
	st.current.Store(g)
	st.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st.current.Load().handler.ServeHTTP(w, r)
	})
	built = true
	return st, nil
}

// build wires one generation from cfg and ver: everything
// config.Reloadable names. It changes nothing shared, so a failed build
// leaves the running generation as it was.
func (st *stack) build(cfg config.Config, ver *verification, idps *idp.Set) (*generation, error) {
	log := st.lg.log
	trusted, err := proxy.ParsePrefixes(cfg.Proxy.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("proxy.trusted_proxies: %w", err)
	}
	var (
		auth        http.Handler
		sessions    proxy.SessionLookup
		cookieNames []string
	)
	if cfg.Verifier() {
		// /api/auth/* belongs to the issuers: answered here, never forwarded.
		auth = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			issuer.WriteError(w, http.StatusNotFound, "NOT_FOUND", "Not found: this sidecar only verifies; /api/auth/* is served by the issuer")
		})
		if len(cfg.Routes.CookieOnly) > 0 {
			ba, err := betterAuthCookie(cfg, st.getenv)
			if err != nil {
				return nil, err
			}
			sr, err := issuer.NewSessionReader(issuer.SessionReaderOptions{
				Store: st.db, Secret: st.secret.Bytes(), BaseURL: cfg.BaseURL, CookieName: cfg.Auth.CookieName, BetterAuthCookie: ba,
			})
			if err != nil {
				return nil, err
			}
			sessions, cookieNames = sr, sr.CookieNames()
		}
	} else {
		lg, err := legacySignIn(cfg, st.getenv, st.legacy)
		if err != nil {
			return nil, err
		}
		iss, err := st.issuer.Reload(issuer.ReloadOptions{
			TrustedOrigins: cfg.Auth.TrustedOrigins,
			Limits:         issuerLimits(cfg.Limits),
			ClientIP:       proxy.ClientIP(trusted),
			Providers:      idps.Providers(),
			Legacy:         lg,
		})
		if err != nil {
			return nil, err
		}
		// The browser client is served beside the issuer at exactly
		// webclient.ClientPath; every other /api/auth path is the issuer's.
		mux := http.NewServeMux()
		mux.Handle("GET "+webclient.ClientPath, webclient.ClientJS())
		// The revocation feed verifiers read, from memory.
		mux.Handle("GET "+issuer.BasePath+"/revocations", ver.revs.feed)
		mux.Handle("/", iss)
		auth, sessions, cookieNames = mux, iss, iss.CookieNames()
	}
	var roles proxy.RoleLookup
	if st.db != nil {
		roles = st.db
	}
	admin := make([]proxy.AdminRoute, len(cfg.Routes.Admin))
	for i, a := range cfg.Routes.Admin {
		admin[i] = proxy.AdminRoute{Prefix: a.Prefix, Roles: a.Roles}
	}
	p, err := proxy.New(proxy.Options{
		Upstream:              st.upstream,
		Auth:                  auth,
		Verifier:              ver.verifier,
		Revocations:           ver.revs.proxyRevocations(),
		Sessions:              sessions,
		Roles:                 roles,
		IdentityHeader:        cfg.Routes.IdentityHeader,
		CookieOnly:            cfg.Routes.CookieOnly,
		Passthrough:           cfg.Routes.Passthrough,
		WebSocketPrefixes:     cfg.Routes.WebsocketPrefixes,
		Admin:                 admin,
		SessionCookieNames:    cookieNames,
		TrustedOrigins:        append([]string{cfg.BaseOrigin()}, cfg.Auth.TrustedOrigins...),
		CORSAllowCredentials:  cfg.CORS.AllowCredentials,
		CORSMaxAge:            cfg.CORS.MaxAge.D(),
		ResponseHeaderTimeout: cfg.Proxy.ResponseHeaderTimeout.D(),
		Transport:             st.transport,
		TrustedProxies:        trusted,
		IPv6Prefix:            cfg.Limits.IPv6Prefix,
		BodyMinRate:           orNone(int64(cfg.Proxy.BodyMinRate)),
		BodyRateGrace:         cfg.Proxy.BodyRateGrace.D(),
		BodyBuffer:            orNone(int64(cfg.Proxy.BodyBuffer)),
		AllowedHosts:          cfg.Proxy.AllowedHosts,
		StripHeaders:          cfg.Proxy.StripHeaders,
		ForwardAuthorization:  cfg.Proxy.ForwardAuthorization,
		Leeway:                cfg.Auth.Leeway.D(),
		Metrics:               st.metrics,
		Logger:                log,
	})
	if err != nil {
		return nil, err
	}
	// The request path, outermost first. Recover is inside Observe, so
	// that a panic's 500 is counted and logged like any answer.
	h := proxy.Chain(p,
		proxy.RequestID(),
		proxy.Observe(st.metrics, st.lg.accessFor(cfg.Log)),
		proxy.Recover(log),
	)
	return &generation{handler: h, ver: ver}, nil
}

// apply makes cfg the config in force: a new generation for every later
// request, the key cache's timings, the log level, and in verifier mode a
// new JWKS URL, fetched before the switch. The caller has checked that
// cfg changes only reloadable keys (config.RestartKeys). On error nothing
// has changed.
func (st *stack) apply(cfg config.Config) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return errors.New("shutting down")
	}
	cur := st.current.Load()
	ver, fresh, err := st.verificationFor(cfg, cur.ver)
	if err != nil {
		return err
	}
	pcs, err := providerConfigs(cfg, st.getenv)
	if err != nil {
		if fresh {
			ver.keys.Close()
			ver.revs.stop()
		}
		return err
	}
	idps, err := st.idps.Reload(pcs)
	if err != nil {
		if fresh {
			ver.keys.Close()
		}
		return err
	}
	g, err := st.build(cfg, ver, idps)
	if err != nil {
		idps.Retire(st.idps)
		if fresh {
			ver.keys.Close()
		}
		return err
	}
	ver.keys.SetMaxAge(cfg.Keys.MaxAge.D())
	ver.keys.SetCooldown(cfg.Keys.Cooldown.D())
	ver.keys.SetStaleIfError(staleIfError(cfg))
	st.lg.level.Set(logLevel(cfg.Log.Level))
	st.current.Store(g)
	// Requests on the old generation may still be at a provider dropped
	// now: closing stops only background work (discovery, key reads).
	st.idps.Retire(idps)
	st.idps = idps
	if fresh {
		// Requests still on the old generation keep verifying with the
		// keys it holds: Close only stops its background reads.
		cur.ver.keys.Close()
		cur.ver.revs.stop()
		st.lg.log.Info("key source switched", "jwks_url", cfg.Keys.JWKSURL, "issuer", ver.id.issuer, "keys", ver.keys.Len())
	}
	return nil
}

// close stops the background reads of the key cache in force; no reload
// applies after it.
func (st *stack) close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	st.current.Load().ver.keys.Close()
	st.current.Load().ver.revs.stop()
	st.idps.Close()
}

// drain runs when shutdown starts: the revocation feed's long polls
// answer at once rather than hold the drain.
func (st *stack) drain() {
	st.current.Load().ver.revs.drainFeed()
}

// clientShare is proxy.upstream_client_share as a number of upstream
// connections: at least one; all of them at 100%.
func clientShare(p config.Proxy) int {
	return max(1, p.UpstreamMaxConns*int(p.UpstreamClientShare)/100)
}

// orNone maps a config value whose 0 means none (off, no buffering) to
// the proxy option's none, which is negative (its zero is the default).
func orNone(v int64) int64 {
	if v == 0 {
		return -1
	}
	return v
}
