package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/jwks"
	"github.com/authsidecar/authsidecar/proxy"
)

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
