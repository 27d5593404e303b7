package revocation_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/revocation"
	"github.com/authsidecar/authsidecar/sqlstore"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const issuerName = "http://issuer.example.test"

// keys is a KeyLookup of one key.
type keys struct {
	kid string
	pub ed25519.PublicKey
}

func (k keys) Lookup(_ context.Context, kid string) (ed25519.PublicKey, error) {
	if kid != k.kid {
		return nil, errors.New("unknown kid")
	}
	return k.pub, nil
}

// signer signs as the issuer does (issuer/jwt.go), with typ as given.
func signer(priv ed25519.PrivateKey, kid string) func(string, json.RawMessage) (string, error) {
	return func(typ string, payload json.RawMessage) (string, error) {
		h, _ := json.Marshal(map[string]string{"alg": "EdDSA", "kid": kid, "typ": typ})
		in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(payload)
		return in + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(in))), nil
	}
}

// issuerSide is a full sidecar's part of the feed: a real SQLite store, a
// set, a poller and the feed behind a real HTTP server.
type issuerSide struct {
	db     *sqlstore.DB
	set    *revocation.Set
	poller *revocation.Poller
	feed   *revocation.Feed
	srv    *httptest.Server
	pub    ed25519.PublicKey
	stop   context.CancelFunc
}

func newIssuerSide(t *testing.T, dbPath string) *issuerSide {
	t.Helper()
	return newIssuerSideAt(t, dbPath, nil)
}

// newIssuerSideAt is newIssuerSide with the feed on clock now (nil:
// time.Now).
func newIssuerSideAt(t *testing.T, dbPath string, now func() time.Time) *issuerSide {
	t.Helper()
	db, err := sqlstore.OpenSQLite(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	pub, priv, _ := ed25519.GenerateKey(nil)
	s := &issuerSide{db: db, pub: pub, set: revocation.NewSet(revocation.SetOptions{TTL: ttl})}
	db.OnRevoke = func(rs []revocation.Record) {
		for _, r := range rs {
			s.set.Add(r.Entry())
		}
	}
	s.feed = revocation.NewFeed(revocation.FeedOptions{Set: s.set, Issuer: issuerName, Sign: signer(priv, "k1"), PollInterval: 50 * time.Millisecond, Logger: quiet, Now: now})
	s.poller = revocation.NewPoller(revocation.PollerOptions{Store: db, Set: s.set, Interval: 50 * time.Millisecond, Feed: s.feed, Logger: quiet})
	if err := s.poller.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.poller.Run(ctx) }()
	s.stop = func() { cancel(); <-done }
	t.Cleanup(s.stop)
	s.srv = httptest.NewServer(s.feed)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *issuerSide) client(t *testing.T, set *revocation.Set, stale time.Duration) (*revocation.Client, func()) {
	t.Helper()
	c, err := revocation.NewClient(revocation.ClientOptions{
		URL: s.srv.URL, Keys: keys{"k1", s.pub}, Issuer: issuerName, Set: set,
		StaleIfError: stale, Wait: 5 * time.Second, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return c, stop
}

func within(t *testing.T, d time.Duration, what string, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func TestPollerLoadsAndFollows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.db")
	db, err := sqlstore.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().Truncate(time.Millisecond)
	if err := db.RevokeAll(context.Background(), now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	set := revocation.NewSet(revocation.SetOptions{TTL: ttl})
	m := revocation.NewMetrics(reg, set.Len, nil)
	p := revocation.NewPoller(revocation.PollerOptions{Store: db, Set: set, Interval: 20 * time.Millisecond, Metrics: m, Logger: quiet})
	if err := set.Check(revocation.TokenOf("s", "u", now)); !errors.Is(err, revocation.ErrUnavailable) {
		t.Fatalf("before Load: got %v, want ErrUnavailable", err)
	}
	if err := p.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := set.Check(revocation.TokenOf("s", "u", now.Add(-2*time.Hour))); err != revocation.ErrRevoked {
		t.Errorf("after Load, a token under the global cutoff: got %v, want ErrRevoked", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	// Another process writes: the poller brings it in within its interval.
	other, err := sqlstore.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	u, s := issuer.User{ID: "u1", Name: "A", Email: "a@example.com", CreatedAt: now, UpdatedAt: now},
		issuer.Session{ID: "s1", Token: "t1", UserID: "u1", ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}
	if err := other.CreateUser(context.Background(), u, "h", s); err != nil {
		t.Fatal(err)
	}
	if _, err := other.EndSession(context.Background(), "t1", "", true, now); err != nil {
		t.Fatal(err)
	}
	took := within(t, time.Second, "the poller reading another process's revocation", func() bool {
		return set.Revoked(revocation.TokenOf("s1", "u1", now))
	})
	t.Logf("read %v after it was written (interval 20ms)", took)
	if m.Age() > time.Second {
		t.Errorf("sync age %v after a poll, want under a second", m.Age())
	}
}

// TestFeedSyncsAVerifier: a verifier's client syncs in full (in pages, a
// set larger than one), then follows: a revocation written on the issuer
// reaches it within the poll interval plus a round trip.
func TestFeedSyncsAVerifier(t *testing.T) {
	is := newIssuerSide(t, filepath.Join(t.TempDir(), "auth.db"))
	now := time.Now().Truncate(time.Millisecond)
	var many []revocation.Entry
	for i := range 25000 {
		many = append(many, revocation.Entry{Kind: revocation.KindSession, Key: uint64(i)*2654435761 + 1, At: now.UnixMilli()})
	}
	is.set.Add(many...) // as if polled: a full sync reads the set
	if err := is.db.RevokeAll(context.Background(), now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	within(t, time.Second, "the issuer polling its own revocation", func() bool { return is.set.GlobalCutoff() != 0 })

	vset := revocation.NewSet(revocation.SetOptions{TTL: ttl})
	is.client(t, vset, time.Minute)
	within(t, 5*time.Second, "the verifier's first sync", vset.Usable)
	if vset.Len() != is.set.Len() {
		t.Errorf("after the full sync the verifier holds %d, the issuer %d", vset.Len(), is.set.Len())
	}
	if !vset.Revoked(revocation.Token{Session: many[24999].Key, User: 1, IssuedAt: 1}) || !vset.Revoked(revocation.TokenOf("x", "y", now.Add(-2*time.Hour))) {
		t.Error("the full sync lost an entry of its second page, or the global cutoff")
	}
	// Long poll: a new revocation reaches the verifier at once.
	for i := range 5 {
		mustUser(t, is.db, fmt.Sprintf("u%d", i), now)
		start := time.Now()
		if _, err := is.db.EndSession(context.Background(), fmt.Sprintf("t-u%d", i), "", true, now); err != nil {
			t.Fatal(err)
		}
		within(t, 2*time.Second, "a revocation reaching the verifier", func() bool {
			return vset.Revoked(revocation.TokenOf(fmt.Sprintf("s-u%d", i), "x", now))
		})
		t.Logf("revocation %d reached the verifier in %v (issuer poll interval 50ms)", i, time.Since(start).Round(time.Millisecond))
	}
}

func mustUser(t *testing.T, db *sqlstore.DB, id string, now time.Time) {
	t.Helper()
	u := issuer.User{ID: id, Name: id, Email: id + "@example.com", CreatedAt: now, UpdatedAt: now}
	s := issuer.Session{ID: "s-" + id, Token: "t-" + id, UserID: id, ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}
	if err := db.CreateUser(context.Background(), u, "h", s); err != nil {
		t.Fatal(err)
	}
}

// TestFeedDownPastItsBound: while the feed fails the verifier keeps
// judging with what it holds; past StaleIfError it refuses to judge
// (ErrUnavailable, with a retry time); once the feed answers it judges
// again, with what it missed.
func TestFeedDownPastItsBound(t *testing.T) {
	is := newIssuerSide(t, filepath.Join(t.TempDir(), "auth.db"))
	var down atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		is.feed.ServeHTTP(w, r)
	}))
	defer front.Close()
	is.srv.URL = front.URL
	vset := revocation.NewSet(revocation.SetOptions{TTL: ttl})
	is.client(t, vset, 2*time.Second)
	within(t, 5*time.Second, "the first sync", vset.Usable)
	now := time.Now().Truncate(time.Millisecond)
	down.Store(true)
	mustUser(t, is.db, "u1", now)
	if _, err := is.db.EndSession(context.Background(), "t-u1", "", true, now); err != nil {
		t.Fatal(err)
	}
	tok := revocation.TokenOf("s-u1", "u1", now)
	if err := vset.Check(tok); err != nil {
		t.Fatalf("feed down, within its bound: got %v, want the token judged (not yet revoked here)", err)
	}
	within(t, 10*time.Second, "the set refusing to judge past the bound", func() bool {
		return errors.Is(vset.Check(tok), revocation.ErrUnavailable)
	})
	var ue *revocation.UnavailableError
	if errors.As(vset.Check(tok), &ue); ue == nil || ue.RetryIn <= 0 || ue.RetryIn > 8*time.Second {
		t.Errorf("unavailable: got %+v, want a retry time within the backoff", ue)
	}
	down.Store(false)
	within(t, 15*time.Second, "recovery with the missed revocation", func() bool {
		return vset.Check(tok) == revocation.ErrRevoked
	})
}

// TestFeedCursorFromAnotherDatabase: a verifier whose cursor is ahead of
// the issuer's database (pointed at another one, or a restore) gets a
// full sync, not silence.
func TestFeedCursorFromAnotherDatabase(t *testing.T) {
	first := newIssuerSide(t, filepath.Join(t.TempDir(), "a.db"))
	for range 5 {
		if err := first.db.RevokeAll(context.Background(), time.Now().Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	vset := revocation.NewSet(revocation.SetOptions{TTL: ttl})
	c, stop := first.client(t, vset, time.Minute)
	within(t, 5*time.Second, "the first sync", func() bool { return vset.Usable() && vset.GlobalCutoff() != 0 })
	stop()
	_ = c
	second := newIssuerSide(t, filepath.Join(t.TempDir(), "b.db"))
	now := time.Now().Truncate(time.Millisecond)
	mustUser(t, second.db, "u1", now)
	if _, err := second.db.EndSession(context.Background(), "t-u1", "", true, now); err != nil {
		t.Fatal(err)
	}
	// The same client state against the second issuer: its cursor (5) is
	// ahead of the second database's head (1).
	cont, err := revocation.NewClient(revocation.ClientOptions{URL: second.srv.URL, Keys: keys{"k1", second.pub}, Issuer: issuerName, Set: vset, Wait: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	revocation.SetCursorForTest(cont, "5")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go cont.Run(ctx)
	within(t, 5*time.Second, "a full sync from the second database", func() bool {
		return vset.Revoked(revocation.TokenOf("s-u1", "u1", now)) && vset.GlobalCutoff() == 0
	})
}

func TestFeedRequests(t *testing.T) {
	is := newIssuerSide(t, filepath.Join(t.TempDir(), "auth.db"))
	for _, tc := range []struct {
		query  string
		status int
	}{
		{"?since=abc", 400},
		{"?since=s.1.9.0", 400},
		{"?since=0&wait=61", 400},
		{"?since=0&wait=x", 400},
		{"?since=0", 200},
		{"", 200},
	} {
		res, err := http.Get(is.srv.URL + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.status {
			t.Errorf("%q: got %d %s, want %d", tc.query, res.StatusCode, body, tc.status)
		}
		if res.StatusCode != 200 && !json.Valid(body) {
			t.Errorf("%q: refusal %q is not JSON", tc.query, body)
		}
	}
	res, err := http.Post(is.srv.URL, "application/json", nil)
	if err == nil && res.StatusCode != 405 {
		t.Errorf("POST: got %d, want 405", res.StatusCode)
	}
}

// TestFeedDrainEndsLongPolls: once shutdown starts (Drain), a long poll
// that is waiting answers at once, and so does one that comes after, so a
// verifier's open request never holds the server's drain.
func TestFeedDrainEndsLongPolls(t *testing.T) {
	is := newIssuerSide(t, filepath.Join(t.TempDir(), "auth.db"))
	get := func(query string) (int, []byte) {
		t.Helper()
		res, err := http.Get(is.srv.URL + query)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, body
	}
	status, tok := get("?since=0")
	if status != 200 {
		t.Fatalf("full sync: got %d %s", status, tok)
	}
	parts := bytes.Split(tok, []byte("."))
	payload, err := base64.RawURLEncoding.DecodeString(string(parts[1]))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Cursor string `json:"cursor"`
	}
	if err := json.Unmarshal(payload, &p); err != nil || p.Cursor == "" {
		t.Fatalf("no cursor in %s (%v)", payload, err)
	}
	done := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		get("?since=" + p.Cursor + "&wait=30")
		done <- time.Since(start)
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case d := <-done:
		t.Fatalf("the long poll answered after %v, before any news or drain", d)
	default:
	}
	is.feed.Drain()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("the long poll still waits 2s after Drain")
	}
	start = time.Now()
	if status, body := get("?since=" + p.Cursor + "&wait=30"); status != 200 || time.Since(start) > time.Second {
		t.Errorf("a long poll after Drain: got %d %s after %v, want 200 at once", status, body, time.Since(start))
	}
}

// TestFeedFullSyncSignedOncePerSecond: anyone may ask for a full sync, so
// a burst of them within one second is built and signed once, not once
// each (20 anonymous first pages cost one signature).
func TestFeedFullSyncSignedOncePerSecond(t *testing.T) {
	set := revocation.NewSet(revocation.SetOptions{TTL: ttl, Usable: true})
	_, priv, _ := ed25519.GenerateKey(nil)
	var signs atomic.Int64
	sign := signer(priv, "k1")
	now := time.Unix(1_800_000_000, 0)
	feed := revocation.NewFeed(revocation.FeedOptions{Set: set, Issuer: issuerName, Logger: quiet, Now: func() time.Time { return now },
		Sign: func(typ string, p json.RawMessage) (string, error) { signs.Add(1); return sign(typ, p) }})
	revocation.SyncedForTest(feed, 0)
	srv := httptest.NewServer(feed)
	t.Cleanup(srv.Close)
	get := func() string {
		res, err := http.Get(srv.URL + "?since=")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Fatalf("full sync: got %d %s", res.StatusCode, b)
		}
		return string(b)
	}
	first := get()
	for range 19 {
		if get() != first {
			t.Fatal("a full sync in the same second: got another answer, want the one signed already")
		}
	}
	if n := signs.Load(); n != 1 {
		t.Errorf("20 full syncs in one second: signed %d times, want 1", n)
	}
	now = now.Add(time.Second)
	get()
	if n := signs.Load(); n != 2 {
		t.Errorf("a full sync the next second: signed %d times in all, want 2 (a fresh iat)", n)
	}
}
