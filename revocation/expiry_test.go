package revocation_test

import (
	"context"
	"crypto/ed25519"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/revocation"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// fakeClock is a clock tests move; safe across goroutines.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// TestSetsDropExpiredOnTheirClock: once no token a revocation covers can
// be valid any more (its time plus the TTL), every process drops it from
// memory on its own clock, without a word from the store or the feed: a
// full sidecar's set (its poller) and a verifier's (its feed client). A
// revocation still within its TTL stays, in both.
func TestSetsDropExpiredOnTheirClock(t *testing.T) {
	clk := newFakeClock(time.Now().Truncate(time.Millisecond))
	db, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "auth.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	pub, priv, _ := ed25519.GenerateKey(nil)
	full := revocation.NewSet(revocation.SetOptions{TTL: ttl, Now: clk.Now})
	feed := revocation.NewFeed(revocation.FeedOptions{Set: full, Issuer: issuerName, Sign: signer(priv, "k1"), PollInterval: 20 * time.Millisecond, Logger: quiet, Now: clk.Now})
	poller := revocation.NewPoller(revocation.PollerOptions{Store: db, Set: full, Interval: 20 * time.Millisecond, Feed: feed, Logger: quiet, Now: clk.Now})
	if err := poller.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go poller.Run(ctx)
	srv := httptest.NewServer(feed)
	t.Cleanup(srv.Close)
	verifier := revocation.NewSet(revocation.SetOptions{TTL: ttl, Now: clk.Now})
	c, err := revocation.NewClient(revocation.ClientOptions{URL: srv.URL, Keys: keys{"k1", pub}, Issuer: issuerName, Set: verifier, Wait: time.Second, Logger: quiet, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	go c.Run(ctx)

	end := func(id string) revocation.Token {
		now := clk.Now()
		mustUser(t, db, id, now)
		if _, err := db.EndSession(context.Background(), "t-"+id, "", true, now); err != nil {
			t.Fatal(err)
		}
		return revocation.TokenOf("s-"+id, id, now)
	}
	old := end("u-old")
	clk.Add(20 * 24 * time.Hour)
	young := end("u-young")
	for name, set := range map[string]*revocation.Set{"full": full, "verifier": verifier} {
		within(t, 5*time.Second, name+" holding both revocations", func() bool {
			return set.Usable() && set.Revoked(old) && set.Revoked(young)
		})
	}

	// Past the first one's TTL (and the minute a process may keep an
	// entry past it), within the second's.
	clk.Add(ttl - 20*24*time.Hour + time.Minute + time.Second)
	for name, set := range map[string]*revocation.Set{"full": full, "verifier": verifier} {
		within(t, 5*time.Second, name+" dropping the expired revocation", func() bool { return set.Len() == 1 })
		if set.Revoked(old) || !set.Revoked(young) {
			t.Errorf("%s: got revoked %v for the expired one, %v for the live one; want false, true", name, set.Revoked(old), set.Revoked(young))
		}
	}
}
