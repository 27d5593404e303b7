package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/jwks"
	"github.com/authsidecar/authsidecar/proxy"
	"github.com/authsidecar/authsidecar/revocation"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// revocations is a verification's revocation set and what fills it
// (docs/revocation.md): in full mode a poller of the store and the feed
// this sidecar serves verifiers from memory; in verifier mode a client of
// the issuer's feed. Built with its verification and put in force with
// it, so a verifier reloaded onto another issuer judges that issuer's
// tokens by that issuer's revocations only.
type revocations struct {
	set    *revocation.Set
	poller *revocation.Poller // full mode
	feed   *revocation.Feed   // full mode
	client *revocation.Client // verifier mode
	cancel context.CancelFunc
	done   chan struct{}
}

// revocationTTL is how long a revocation can cover a live token.
func revocationTTL(cfg config.Config) time.Duration { return cfg.Auth.JWTTTL.D() + cfg.Auth.Leeway.D() }

// newFullRevocations builds a full sidecar's: the set, fed at once by the
// store's own writes (OnRevoke) and by a poller; the feed verifiers read,
// signed by st.issuer (set before anything is served).
func (st *stack) newFullRevocations(cfg config.Config, db *sqlstore.DB) *revocations {
	set := revocation.NewSet(revocation.SetOptions{TTL: revocationTTL(cfg)})
	db.OnRevoke = func(rs []revocation.Record) {
		es := make([]revocation.Entry, len(rs))
		for i, r := range rs {
			es[i] = r.Entry()
		}
		set.Add(es...)
	}
	feed := revocation.NewFeed(revocation.FeedOptions{
		Set: set, Issuer: cfg.JWTIssuer(), PollInterval: cfg.Revocation.PollInterval.D(), Metrics: st.revMetrics, Logger: st.lg.log,
		Sign: func(typ string, p json.RawMessage) (string, error) { return st.issuer.SignFeed(typ, p) },
	})
	return &revocations{
		set:  set,
		feed: feed,
		poller: revocation.NewPoller(revocation.PollerOptions{
			Store: db, Set: set, Interval: cfg.Revocation.PollInterval.D(), Feed: feed,
			Metrics: st.revMetrics, Logger: st.lg.log,
			QueryContext: func(ctx context.Context) context.Context { return proxy.WithClass(ctx, proxy.ClassRevocation) },
		}),
	}
}

// newVerifierRevocations builds a verifier's from the issuer's feed, read
// with keys (the verification's own key cache); nil when
// keys.revocations_url is empty (an issuer without a feed, which start-up
// says aloud).
func (st *stack) newVerifierRevocations(cfg config.Config, keys *proxy.KeyCache) (*revocations, error) {
	url := cfg.RevocationFeedURL()
	if url == "" {
		return nil, nil
	}
	hc, err := jwks.HTTPClient(cfg.Keys.JWKSCAFile)
	if err != nil {
		return nil, fmt.Errorf("keys.revocations_url: %w", err)
	}
	set := revocation.NewSet(revocation.SetOptions{TTL: revocationTTL(cfg)})
	c, err := revocation.NewClient(revocation.ClientOptions{
		URL: url, HTTPClient: hc, Keys: keys, Issuer: cfg.JWTIssuer(), Set: set,
		StaleIfError: cfg.Keys.RevocationsStaleIfError.D(), Metrics: st.revMetrics, Logger: st.lg.log,
	})
	if err != nil {
		return nil, fmt.Errorf("keys.revocations_url: %w", err)
	}
	return &revocations{set: set, client: c}, nil
}

// start runs the poller or the client in the background until stop.
func (r *revocations) start() {
	if r == nil || r.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		if r.poller != nil {
			r.poller.Run(ctx)
		} else {
			r.client.Run(ctx)
		}
	}()
}

// stop ends the background reads and waits for them; the set keeps
// answering from what it holds.
func (r *revocations) stop() {
	if r == nil || r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
}

// drainFeed makes the feed's long polls answer now (shutdown has begun).
func (r *revocations) drainFeed() {
	if r != nil && r.feed != nil {
		r.feed.Drain()
	}
}

// proxyRevocations is what the proxy checks: nil (an untyped nil, not a
// nil *Set) when there is no set.
func (r *revocations) proxyRevocations() proxy.Revocations {
	if r == nil {
		return nil
	}
	return r.set
}

// ready fails until the first complete read (the poller's Load, the
// client's full sync), and in verifier mode again once the feed has
// failed past keys.revocations_stale_if_error.
func (r *revocations) ready() error {
	if r != nil && !r.set.Usable() {
		return errors.New("revocations not synced")
	}
	return nil
}

// awaitSync waits up to d for a verifier's first complete sync: a reload
// switches to a new issuer only once its revocations are in.
func (r *revocations) awaitSync(d time.Duration) error {
	if r == nil {
		return nil
	}
	deadline := time.Now().Add(d)
	for !r.set.Usable() {
		if time.Now().After(deadline) {
			return fmt.Errorf("no complete read of %s within %s", "keys.revocations_url", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
