package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/proxy"
	"github.com/authsidecar/authsidecar/sqlstore"
	"github.com/authsidecar/authsidecar/webclient"
)

// stack is the wired request path: the issuer behind /api/auth, the key
// cache the verifier reads, and the proxy in front of both.
type stack struct {
	handler http.Handler
	issuer  *issuer.Issuer
	keys    *proxy.KeyCache
}

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

// buildStack wires issuer, key cache, verifier and proxy from the config.
// It loads the key set before returning, so the first request finds it.
func buildStack(ctx context.Context, cfg config.Config, secret config.Secret, db *sqlstore.DB, lg logs, reg prometheus.Registerer) (*stack, error) {
	log := lg.log
	metrics := proxy.NewMetrics(reg)
	src := &issuerKeys{}
	keys := proxy.NewKeyCache(proxy.KeyCacheOptions{
		Source:    src,
		MaxAge:    cfg.Keys.MaxAge.D(),
		Cooldown:  cfg.Keys.Cooldown.D(),
		OnRefresh: metrics.ObserveRefresh,
		Logger:    log,
	})
	proxy.RegisterKeyCache(reg, keys)
	trusted, err := proxy.ParsePrefixes(cfg.Proxy.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("proxy.trusted_proxies: %w", err)
	}
	clientIP := proxy.ClientIP(trusted)
	opts := issuerOptions(cfg, secret, db, log)
	opts.Registerer = reg
	opts.ClientIP = clientIP
	// A key the issuer creates reaches the verifier before any JWT it signs.
	opts.OnNewKey = func(k issuer.PublicKey) { keys.Add(proxy.Key{KID: k.KID, Public: k.Key}) }
	iss, err := issuer.New(ctx, opts)
	if err != nil {
		return nil, err
	}
	src.iss = iss
	if err := keys.Load(ctx); err != nil {
		return nil, fmt.Errorf("load keys: %w", err)
	}
	upstream, err := url.Parse(cfg.Upstream)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	admin := make([]proxy.AdminRoute, len(cfg.Routes.Admin))
	for i, a := range cfg.Routes.Admin {
		admin[i] = proxy.AdminRoute{Prefix: a.Prefix, Roles: a.Roles}
	}
	origin := cfg.BaseOrigin()
	verifier := proxy.NewCachingVerifier(proxy.CachingVerifierOptions{
		Inner: proxy.NewJWTVerifier(proxy.JWTVerifierOptions{
			Keys: keys, Issuer: origin, Audience: origin,
			Leeway: cfg.Auth.Leeway.D(), MaxTTL: cfg.Auth.JWTTTL.D(),
		}),
		Keys:       keys,
		Size:       cfg.Cache.VerifiedTokens,
		Leeway:     cfg.Auth.Leeway.D(),
		Registerer: reg,
	})
	// The browser client is served beside the issuer at exactly
	// webclient.ClientPath; every other /api/auth path is the issuer's.
	auth := http.NewServeMux()
	auth.Handle("GET "+webclient.ClientPath, webclient.ClientJS())
	auth.Handle("/", iss)
	p, err := proxy.New(proxy.Options{
		Upstream:              upstream,
		Auth:                  auth,
		Verifier:              verifier,
		Sessions:              iss,
		Roles:                 db,
		IdentityHeader:        cfg.Routes.IdentityHeader,
		CookieOnly:            cfg.Routes.CookieOnly,
		Passthrough:           cfg.Routes.Passthrough,
		WebSocketPrefixes:     cfg.Routes.WebsocketPrefixes,
		Admin:                 admin,
		SessionCookieNames:    []string{iss.CookieName()},
		TrustedOrigins:        append([]string{origin}, cfg.Auth.TrustedOrigins...),
		CORSAllowCredentials:  cfg.CORS.AllowCredentials,
		CORSMaxAge:            cfg.CORS.MaxAge.D(),
		ResponseHeaderTimeout: cfg.Proxy.ResponseHeaderTimeout.D(),
		TrustedProxies:        trusted,
		AllowedHosts:          cfg.Proxy.AllowedHosts,
		StripHeaders:          cfg.Proxy.StripHeaders,
		ForwardAuthorization:  cfg.Proxy.ForwardAuthorization,
		Metrics:               metrics,
		Logger:                log,
	})
	if err != nil {
		return nil, err
	}
	// The request path, outermost first.
	h := proxy.Chain(p,
		proxy.Recover(log),
		proxy.RequestID(),
		proxy.Observe(metrics, lg.access),
	)
	return &stack{handler: h, issuer: iss, keys: keys}, nil
}

// countQueries counts every store query by the route class of the request
// that caused it: the contract's "zero queries on business routes" made
// visible live (authsidecar_db_queries_total{class="business"} stays 0).
func countQueries(db *sqlstore.DB, reg prometheus.Registerer) {
	queries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "authsidecar_db_queries_total", Help: "Store queries by the route class that caused them (keyset: key cache reads; other: start-up and background work).",
	}, []string{"class"})
	reg.MustRegister(queries)
	db.Observe = func(ctx context.Context, _ string) {
		class := "other"
		if info := proxy.Info(ctx); info != nil {
			class = info.Class.String()
		}
		queries.WithLabelValues(class).Inc()
	}
}
