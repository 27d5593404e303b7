package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/idp"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/jwks"
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

// verification is the key cache and the verifier that reads it, with its
// token cache, for one key source and one expected issuer. They are built
// together and put in force together, in one generation swap: a token is
// never judged by one issuer's keys and another's iss/aud, and a token
// verified under one issuer is never a cache hit under another (the token
// cache is keyed by the token alone). A reload builds a new one only when
// its id changes (a verifier's keys.jwks_url or keys.jwks_ca_file, and so
// perhaps the issuer derived from the URL); otherwise the next generation
// shares it, keys, token cache and all.
type verification struct {
	id       verificationID
	keys     *proxy.KeyCache
	verifier proxy.Verifier
	// revs is the revocation set the proxy checks after the verifier, and
	// what fills it; nil for a verifier whose issuer has no feed.
	revs *revocations
}

// verificationID is what a verification is built from that a reload can
// change.
type verificationID struct {
	jwksURL, jwksCAFile string
	issuer              string // iss and aud
	revocationsURL      string // the feed, derived from jwksURL unless set
}

func verificationOf(cfg config.Config) verificationID {
	return verificationID{jwksURL: cfg.Keys.JWKSURL, jwksCAFile: cfg.Keys.JWKSCAFile, issuer: cfg.JWTIssuer(), revocationsURL: cfg.RevocationFeedURL()}
}

// keys returns the key cache in force.
func (st *stack) keys() *proxy.KeyCache { return st.current.Load().ver.keys }

// issuerKeys adapts the issuer's usable keys to the proxy's KeySource.
type issuerKeys struct{ iss *issuer.Issuer }

func (k *issuerKeys) PublicKeys(ctx context.Context) ([]proxy.Key, error) {
	pks, err := k.iss.PublicKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]proxy.Key, len(pks))
	for i, pk := range pks {
		out[i] = proxy.Key{KID: pk.KID, Public: pk.Key}
	}
	return out, nil
}

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
		}),
		getenv: getenv, idpm: idp.NewMetrics(reg),
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
	st.current.Store(g)
	st.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st.current.Load().handler.ServeHTTP(w, r)
	})
	built = true
	return st, nil
}

// jwksSource is a verifier's key source: the JWKS at keys.jwks_url.
func jwksSource(cfg config.Config, log *slog.Logger) (proxy.KeySource, error) {
	fetcher, err := jwks.New(jwks.Options{URL: cfg.Keys.JWKSURL, CAFile: cfg.Keys.JWKSCAFile, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("keys.jwks_url: %w", err)
	}
	return fetcher, nil
}

// newVerification builds an empty key cache on src and the verifier
// reading it, and in verifier mode the client of the issuer's revocation
// feed; the caller loads the keys and starts the revocations.
func (st *stack) newVerification(cfg config.Config, src proxy.KeySource) (*verification, error) {
	keys := proxy.NewKeyCache(proxy.KeyCacheOptions{
		Source:       src,
		MaxAge:       cfg.Keys.MaxAge.D(),
		Cooldown:     cfg.Keys.Cooldown.D(),
		StaleIfError: staleIfError(cfg),
		OnRefresh:    st.metrics.ObserveRefresh,
		Logger:       st.lg.log,
	})
	name := cfg.JWTIssuer()
	var revs *revocations
	if cfg.Verifier() {
		var err error
		if revs, err = st.newVerifierRevocations(cfg, keys); err != nil {
			keys.Close()
			return nil, err
		}
	}
	return &verification{
		id:   verificationOf(cfg),
		keys: keys,
		revs: revs,
		verifier: proxy.NewCachingVerifier(proxy.CachingVerifierOptions{
			Inner: proxy.NewJWTVerifier(proxy.JWTVerifierOptions{
				Keys: keys, Issuer: name, Audience: name,
				Leeway: cfg.Auth.Leeway.D(), MaxTTL: cfg.Auth.JWTTTL.D(),
			}),
			Keys:    keys,
			Size:    cfg.Cache.VerifiedTokens,
			Leeway:  cfg.Auth.Leeway.D(),
			Metrics: st.tokens,
		}),
	}, nil
}

// reloadKeysTimeout bounds the fetch of a new JWKS URL during a reload,
// which is synchronous (POST /-/reload answers once it is done). The
// fetcher's own timeout is the same 5s.
const reloadKeysTimeout = 5 * time.Second

// verificationFor returns the verification cfg needs: cur when its id is
// cfg's, else a new one whose keys have been fetched, so that the switch
// to a new JWKS URL happens only once it has brought usable keys. fresh
// reports a new one, which the caller must close unless it goes in force.
func (st *stack) verificationFor(cfg config.Config, cur *verification) (ver *verification, fresh bool, err error) {
	if cur.id == verificationOf(cfg) {
		return cur, false, nil
	}
	if !cfg.Verifier() {
		// Only restart keys change it in full mode; RestartKeys refused them.
		return nil, false, errors.New("the key source of a full sidecar changes only with a restart")
	}
	src, err := jwksSource(cfg, st.lg.log)
	if err != nil {
		return nil, false, err
	}
	if ver, err = st.newVerification(cfg, src); err != nil {
		return nil, false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), reloadKeysTimeout)
	defer cancel()
	if err := ver.keys.Prime(ctx); err != nil {
		ver.keys.Close()
		return nil, false, fmt.Errorf("keys.jwks_url: no usable key set, the one in force stays: %w", err)
	}
	// The new issuer's revocations come with its keys: a switch before
	// they are in would let its revoked tokens through.
	ver.revs.start()
	if err := ver.revs.awaitSync(reloadKeysTimeout); err != nil {
		ver.revs.stop()
		ver.keys.Close()
		return nil, false, fmt.Errorf("keys.revocations_url: the one in force stays: %w", err)
	}
	return ver, true, nil
}

// staleIfError is the key cache's StaleIfError for cfg: the cache counts
// from the last good fetch; the config's window starts when the keys turn
// stale, max_age later. Full mode reads a local database: zero, forever.
func staleIfError(cfg config.Config) time.Duration {
	if !cfg.Verifier() {
		return 0
	}
	return cfg.Keys.MaxAge.D() + cfg.Keys.StaleIfError.D()
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
			sr, err := issuer.NewSessionReader(issuer.SessionReaderOptions{
				Store: st.db, Secret: st.secret.Bytes(), BaseURL: cfg.BaseURL, CookieName: cfg.Auth.CookieName,
			})
			if err != nil {
				return nil, err
			}
			sessions, cookieNames = sr, []string{sr.CookieName()}
		}
	} else {
		iss, err := st.issuer.Reload(issuer.ReloadOptions{
			TrustedOrigins: cfg.Auth.TrustedOrigins,
			Limits:         issuerLimits(cfg.Limits),
			ClientIP:       proxy.ClientIP(trusted),
			Providers:      idps.Providers(),
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
		auth, sessions, cookieNames = mux, iss, []string{iss.CookieName()}
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
	// The request path, outermost first.
	h := proxy.Chain(p,
		proxy.Recover(log),
		proxy.RequestID(),
		proxy.Observe(st.metrics, st.lg.accessFor(cfg.Log)),
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

// countQueries counts every store query by the route class of the request
// that caused it: the contract's "zero queries on business routes" made
// visible live (authsidecar_db_queries_total{class="business"} stays 0).
func countQueries(db *sqlstore.DB, reg prometheus.Registerer) {
	queries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "authsidecar_db_queries_total", Help: "Store queries by the route class that caused them (keyset: key cache reads; revocation: the revocation poller's reads, one per poll interval; other: start-up and background work).",
	}, []string{"class"})
	reg.MustRegister(queries)
	if db == nil {
		// Verifier mode has no store: nothing to count.
		return
	}
	// At 0 from the start: the alert that business and websocket requests
	// never query the store must match a series on a fresh process.
	for _, class := range proxy.ClassNames() {
		queries.WithLabelValues(class)
	}
	queries.WithLabelValues("other")
	db.Observe = func(ctx context.Context, _ string) {
		class := "other"
		if info := proxy.Info(ctx); info != nil {
			class = info.Class.String()
		}
		queries.WithLabelValues(class).Inc()
	}
}
