package revocation_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authsidecar/authsidecar/revocation"
)

// feedRig is a feed on a clock the test moves, behind a real HTTP server,
// with what it signs counted: every answer, and the page builds (answers
// that list revocations).
type feedRig struct {
	feed    *revocation.Feed
	set     *revocation.Set
	srv     *httptest.Server
	metrics *revocation.Metrics
	reg     *prometheus.Registry
	clock   atomic.Int64 // UnixNano
	signs   atomic.Int64
	pages   atomic.Int64
	// hold, when set, runs before each signature.
	hold func()
}

func newFeedRig(t testing.TB, recs ...revocation.Record) *feedRig {
	t.Helper()
	rig := &feedRig{reg: prometheus.NewRegistry()}
	rig.clock.Store(time.Unix(1_800_000_000, 0).UnixNano())
	now := func() time.Time { return time.Unix(0, rig.clock.Load()) }
	rig.set = revocation.NewSet(revocation.SetOptions{TTL: ttl, Usable: true, Now: now})
	rig.metrics = revocation.NewMetrics(rig.reg, rig.set.Len, now)
	_, priv, _ := ed25519.GenerateKey(nil)
	sign := signer(priv, "k1")
	rig.feed = revocation.NewFeed(revocation.FeedOptions{
		Set: rig.set, Issuer: issuerName, Metrics: rig.metrics, Logger: quiet, Now: now, PollInterval: 250 * time.Millisecond,
		Sign: func(typ string, p json.RawMessage) (string, error) {
			if rig.hold != nil {
				rig.hold()
			}
			rig.signs.Add(1)
			var a feedAnswer
			if err := json.Unmarshal(p, &a); err != nil {
				return "", err
			}
			if a.entries() > 0 {
				rig.pages.Add(1)
			}
			return sign(typ, p)
		},
	})
	if len(recs) > 0 {
		revocation.ReadForTest(rig.feed, recs...)
	} else {
		revocation.SyncedForTest(rig.feed, 0)
	}
	rig.srv = httptest.NewServer(rig.feed)
	t.Cleanup(rig.srv.Close)
	return rig
}

func (rig *feedRig) advance(d time.Duration) { rig.clock.Add(int64(d)) }

// get asks the feed for since (wait 0) and returns the answer's status,
// its Retry-After and its body.
func (rig *feedRig) get(t testing.TB, since string) (int, string, []byte) {
	t.Helper()
	res, err := http.Get(rig.srv.URL + "?" + url.Values{"since": {since}, "wait": {"0"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header.Get("Retry-After"), body
}

// answer asks for since and returns the answer's payload, failing unless
// it is a 200.
func (rig *feedRig) answer(t testing.TB, since string) feedAnswer {
	t.Helper()
	status, _, body := rig.get(t, since)
	if status != 200 {
		t.Fatalf("since=%q: got %d %s, want 200", since, status, body)
	}
	return payloadOf(t, body)
}

// feedAnswer is a feed answer's payload, read without its signature
// (openAnswer's tests check that).
type feedAnswer struct {
	Since    string `json:"since"`
	Cursor   string `json:"cursor"`
	Reset    bool   `json:"reset"`
	Complete bool   `json:"complete"`
	All      int64  `json:"all"`
	Sessions []byte `json:"sessions"`
	Users    []byte `json:"users"`
	tok      string
}

func (a feedAnswer) entries() int { return (len(a.Sessions) + len(a.Users)) / 16 }

// redirect reports whether a is an answer that lists nothing and sends the
// asker on.
func (a feedAnswer) redirect() bool { return a.entries() == 0 && a.All == 0 && !a.Complete }

func payloadOf(t testing.TB, tok []byte) feedAnswer {
	t.Helper()
	parts := bytes.Split(tok, []byte("."))
	if len(parts) != 3 {
		t.Fatalf("answer %.80q is not a compact JWS", tok)
	}
	payload, err := base64.RawURLEncoding.DecodeString(string(parts[1]))
	if err != nil {
		t.Fatal(err)
	}
	var a feedAnswer
	if err := json.Unmarshal(payload, &a); err != nil {
		t.Fatal(err)
	}
	a.tok = string(tok)
	return a
}

// sessionRecords returns n session revocations with ids from first on,
// every step.
func sessionRecords(first, step int64, n int) []revocation.Record {
	at := time.Unix(1_800_000_000, 0).Add(-time.Hour)
	recs := make([]revocation.Record, n)
	for i := range recs {
		id := first + int64(i)*step
		recs[i] = revocation.Record{ID: id, Kind: revocation.KindSession, Subject: fmt.Sprintf("session-%d", id), At: at}
	}
	return recs
}

func wantRefusal(t *testing.T, what string, status int, body []byte, wantStatus int, wantCode string) {
	t.Helper()
	var e struct{ Code, Message string }
	if err := json.Unmarshal(body, &e); err != nil {
		t.Errorf("%s: refusal %q is not JSON: %v", what, body, err)
	}
	if status != wantStatus || e.Code != wantCode || e.Message == "" {
		t.Errorf("%s: got %d %s, want %d with code %s and a message", what, status, body, wantStatus, wantCode)
	}
}

// TestFeedCursorSpellings: a cursor has one spelling, the one the feed
// writes; every other is refused before anything is built (each would
// be a page built and signed of its own: the answer echoes since).
// Every cursor the feed writes, through a full sync of several pages of
// both kinds and the news after it, is in that spelling and names a real
// position (answered with a page, never a redirect).
func TestFeedCursorSpellings(t *testing.T) {
	rig := newFeedRig(t, sessionRecords(1, 1, 3)...)
	for _, since := range []string{
		// The issue's: the same position as s.0.1.0.
		"s.00.1.0", "s.0.1.000", "s.0.01.0", "s.0.1.00",
		"s.+0.1.0", "s.-0.1.0", "s.0.+1.0", "s.0.1.+0", "s.0.1.-0",
		"s.0.1.A", "s.0.1.0a", "s.0.1.0x1", "s.0.1.0_1", "s.0_0.1.0",
		"S.0.1.0", "s.0.1.0.", "s..1.0", "s.0..0", "s.0.1.", "s.0.1", "s.", "s",
		" s.0.1.0", "s.0.1.0 ", "s.0.1.0\x00",
		"s.0.0.0", "s.0.3.0", "s.0.256.0",
		"s.9223372036854775808.1.0", "s.0.1.10000000000000000",
		// Incremental cursors.
		"00", "01", "+1", "-0", "-1", "1.0", "1e3", "0x1", " 1", "1 ", "9223372036854775808",
	} {
		status, _, body := rig.get(t, since)
		wantRefusal(t, fmt.Sprintf("since=%q", since), status, body, 400, "INVALID_CURSOR")
	}
	if n := rig.signs.Load(); n != 0 {
		t.Errorf("refusals signed %d answers, want none", n)
	}
	for _, since := range []string{"", "0", "3", "s.3.1.0", "s.3.2.0", "s.0.1.0"} {
		rig.answer(t, since)
	}

	t.Run("every cursor written", func(t *testing.T) {
		// 2.5 pages of sessions, 1.2 of users; ids with gaps.
		recs := sessionRecords(1, 3, 50000)
		for i := range 24000 {
			recs = append(recs, revocation.Record{ID: 200_000 + int64(i)*2, Kind: revocation.KindUser, Subject: fmt.Sprintf("user-%d", i), At: recs[0].At})
		}
		rig := newFeedRig(t, recs...)
		since, pages := "", 0
		for {
			a := rig.answer(t, since)
			pages++
			if a.Cursor == "" {
				t.Fatalf("since=%q: answer without a cursor", since)
			}
			if !a.Complete && a.redirect() {
				t.Fatalf("since=%q: a cursor the feed wrote was answered with a redirect to %q", since, a.Cursor)
			}
			if a.Complete {
				since = a.Cursor
				break
			}
			since = a.Cursor
		}
		if pages != 5 {
			t.Errorf("a full sync of 50,000 sessions and 24,000 users took %d pages, want 5", pages)
		}
		if want := strconv.FormatInt(recs[len(recs)-1].ID, 10); since != want {
			t.Errorf("the full sync ended at cursor %q, want the head %q", since, want)
		}
		// News after the sync: the cursor each answer writes is asked next.
		next := recs[len(recs)-1].ID + 5
		revocation.ReadForTest(rig.feed, sessionRecords(next, 1, 2)...)
		a := rig.answer(t, since)
		if a.entries() != 2 || a.Cursor != strconv.FormatInt(next+1, 10) {
			t.Errorf("news from %s: got %d entries and cursor %q, want 2 and %d", since, a.entries(), a.Cursor, next+1)
		}
		if b := rig.answer(t, a.Cursor); b.entries() != 0 || b.Cursor != a.Cursor || !b.Complete {
			t.Errorf("at the head: got %d entries, cursor %q, complete %v; want none, %q, true", b.entries(), b.Cursor, b.Complete, a.Cursor)
		}
	})
}

// TestFeedClampsPositions: a well-spelt cursor that names no real
// position (a head that was never this process's, a key it does not
// hold: between two, beyond the last) gets a small answer that sends the
// asker to the real one it stands for, whose page is the one every asker
// shares: however many such cursors are asked, only real positions are
// built. A cursor behind what the log keeps, or ahead of the process
// after two polls (another database's), is sent to a full sync.
func TestFeedClampsPositions(t *testing.T) {
	at := time.Unix(1_800_000_000, 0).Add(-time.Hour)
	recs := []revocation.Record{
		{ID: 10, Kind: revocation.KindSession, Subject: "a", At: at},
		{ID: 20, Kind: revocation.KindSession, Subject: "b", At: at},
		{ID: 30, Kind: revocation.KindUser, Subject: "c", At: at},
		{ID: 40, Kind: revocation.KindSession, Subject: "d", At: at},
	}
	rig := newFeedRig(t, recs...)
	ks := []uint64{revocation.SessionKey("a"), revocation.SessionKey("b"), revocation.SessionKey("d")}
	slices.Sort(ks)
	user := revocation.UserKey("c")
	hex := func(k uint64) string { return strconv.FormatUint(k, 16) }
	for _, tc := range []struct{ since, want string }{
		{"s.15.1.0", "s.10.1.0"},
		{"s.5.1.0", "s.0.1.0"},
		{"s.39.2.0", "s.30.2.0"},
		{"s.40.1." + hex(ks[0]+1), "s.40.1." + hex(ks[0])},
		{"s.40.1." + hex(ks[0]-1), "s.40.1.0"},
		{"s.40.1.ffffffffffffffff", "s.40.1." + hex(ks[2])},
		{"s.40.2." + hex(user+1), "s.40.2." + hex(user)},
		{"s.35.1." + hex(ks[1]+1), "s.30.1." + hex(ks[1])},
		{"15", "10"},
		{"5", "0"},
		{"39", "30"},
	} {
		a := rig.answer(t, tc.since)
		if !a.redirect() || a.Reset || a.Cursor != tc.want {
			t.Errorf("since=%q: got cursor %q (%d entries, reset %v, complete %v), want a redirect to %q", tc.since, a.Cursor, a.entries(), a.Reset, a.Complete, tc.want)
		}
	}
	if n := rig.pages.Load(); n != 0 {
		t.Errorf("cursors naming no real position built %d pages, want none", n)
	}

	// Real positions are pages; a hundred cursors between two keys all
	// lead to the one page, built once.
	real := "s.40.1." + hex(ks[0])
	page := rig.answer(t, real)
	if page.redirect() || page.entries() != 2 {
		t.Fatalf("since=%q: got %d entries (cursor %q), want the page of the 2 keys above", real, page.entries(), page.Cursor)
	}
	for i := range uint64(100) {
		since := "s.40.1." + hex(ks[0]+1+i*((ks[1]-ks[0]-1)/100))
		if a := rig.answer(t, since); a.Cursor != real || !a.redirect() {
			t.Fatalf("since=%q: got cursor %q (%d entries), want a redirect to %q", since, a.Cursor, a.entries(), real)
		}
		if a := rig.answer(t, real); a.tok != page.tok {
			t.Fatal("the page a redirect leads to was built again, want the one kept")
		}
	}
	if n := rig.pages.Load(); n != 1 {
		t.Errorf("100 cursors between two keys and their real one: %d pages built, want 1", n)
	}

	t.Run("behind the log", func(t *testing.T) {
		// 70,000 records: the log keeps the last 32,768; those before are
		// behind it.
		rig := newFeedRig(t, sessionRecords(1, 1, 70000)...)
		for _, since := range []string{"100", "s.100.1.0", "s.100.2.0"} {
			a := rig.answer(t, since)
			if !a.redirect() || !a.Reset || a.Cursor != "s.70000.1.0" {
				t.Errorf("since=%q: got cursor %q (%d entries, reset %v), want a full sync's start: a reset redirect to s.70000.1.0", since, a.Cursor, a.entries(), a.Reset)
			}
		}
		if n := rig.pages.Load(); n != 0 {
			t.Errorf("%d pages built, want none", n)
		}
	})

	t.Run("ahead after two polls", func(t *testing.T) {
		rig := newFeedRig(t, recs...)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
					revocation.SyncedForTest(rig.feed, 40) // a poll that found nothing
				}
			}
		})
		defer func() { close(stop); wg.Wait() }()
		for _, since := range []string{"999", "s.999.1.0", "s.999.2." + hex(user)} {
			a := rig.answer(t, since)
			if !a.redirect() || !a.Reset || a.Cursor != "s.40.1.0" {
				t.Errorf("since=%q: got cursor %q (%d entries, reset %v), want a reset redirect to s.40.1.0", since, a.Cursor, a.entries(), a.Reset)
			}
		}
	})
}

// TestFeedBuildBudget: page builds are paid from a budget every asker
// shares: a burst of distinct real positions (a hundred heads) gets
// BuildBurst pages at once and 503 FEED_BUSY with Retry-After for the
// rest, then BuildsPerSecond more each second. What is never refused:
// pages already built, redirects, and news of up to FreeEntries
// revocations, so a verifier that is in sync never waits on it; news of
// more is charged.
func TestFeedBuildBudget(t *testing.T) {
	recs := sessionRecords(1, 1, revocation.FreeEntries+100)
	head := recs[len(recs)-1].ID
	rig := newFeedRig(t, recs...)
	built := 0
	for i := range revocation.BuildBurst + 10 {
		since := fmt.Sprintf("s.%d.1.0", head-int64(i))
		status, retry, body := rig.get(t, since)
		switch {
		case i < revocation.BuildBurst:
			if status != 200 {
				t.Fatalf("page %d of the burst (since=%s): got %d %s, want 200", i, since, status, body)
			}
			built++
		default:
			wantRefusal(t, "past the burst, since="+since, status, body, 503, "FEED_BUSY")
			if retry != "1" {
				t.Errorf("past the burst: Retry-After %q, want 1", retry)
			}
		}
	}
	if got := rig.answers(t, "refused"); got != 10 {
		t.Errorf("refused answers counted: got %v, want 10", got)
	}

	// While it is spent: a page built this second, a redirect, news.
	rig.answer(t, fmt.Sprintf("s.%d.1.0", head))
	if a := rig.answer(t, fmt.Sprintf("s.%d.1.1", head)); !a.redirect() {
		t.Errorf("a redirect while the budget is spent: got %d entries", a.entries())
	}
	if a := rig.answer(t, strconv.FormatInt(head-int64(revocation.FreeEntries), 10)); a.entries() != revocation.FreeEntries {
		t.Errorf("news of %d revocations while the budget is spent: got %d entries", revocation.FreeEntries, a.entries())
	}
	status, _, body := rig.get(t, strconv.FormatInt(head-int64(revocation.FreeEntries)-1, 10))
	wantRefusal(t, "news of FreeEntries+1 while the budget is spent", status, body, 503, "FEED_BUSY")

	rig.advance(time.Second)
	for i := range revocation.BuildsPerSecond + 1 {
		since := fmt.Sprintf("s.%d.2.0", head-int64(i))
		status, _, body := rig.get(t, since)
		switch {
		case i < revocation.BuildsPerSecond && status != 200:
			t.Errorf("a second later, page %d (since=%s): got %d %s, want 200", i, since, status, body)
		case i == revocation.BuildsPerSecond:
			wantRefusal(t, "a second later, past the rate", status, body, 503, "FEED_BUSY")
		}
	}
	if n := rig.pages.Load(); n != int64(revocation.BuildBurst+1) {
		// The burst's pages and the news; the user pages list nothing.
		t.Errorf("pages listing revocations built: got %d, want %d", n, revocation.BuildBurst+1)
	}
}

// answers reads authsidecar_revocation_feed_answers_total{result}.
func (rig *feedRig) answers(t *testing.T, result string) float64 {
	t.Helper()
	mfs, err := rig.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "authsidecar_revocation_feed_answers_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no authsidecar_revocation_feed_answers_total{result=%q}", result)
	return 0
}

// TestFeedSharesABuild: askers of the same new cursor at the same time
// (verifiers started together) cost one build: the first builds, the
// others wait for it and get its answer.
func TestFeedSharesABuild(t *testing.T) {
	rig := newFeedRig(t, sessionRecords(1, 1, 30000)...)
	const n = 8
	var entered, signing atomic.Int64
	rig.hold = func() {
		// Hold the first build until every request is in and, as the
		// others would be signing too if they built, until they are or
		// some time has passed.
		if signing.Add(1) > 1 {
			return
		}
		for entered.Load() < n {
			time.Sleep(time.Millisecond)
		}
		for start := time.Now(); signing.Load() < n && time.Since(start) < 200*time.Millisecond; {
			time.Sleep(time.Millisecond)
		}
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		rig.feed.ServeHTTP(w, r)
	}))
	defer front.Close()
	toks := make([]string, n)
	var wg sync.WaitGroup
	for i := range toks {
		wg.Go(func() {
			res, err := http.Get(front.URL + "?since=s.30000.1.0")
			if err != nil {
				t.Error(err)
				return
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != 200 {
				t.Errorf("asker %d: got %d %s, want 200", i, res.StatusCode, b)
			}
			toks[i] = string(b)
		})
	}
	wg.Wait()
	for i, tok := range toks {
		if tok != toks[0] || tok == "" {
			t.Errorf("asker %d got another answer than the first", i)
		}
	}
	if s := rig.signs.Load(); s != 1 {
		t.Errorf("%d askers of the same page at once: %d builds, want 1", n, s)
	}
	if got := rig.answers(t, "shared"); got != n-1 {
		t.Errorf("shared answers counted: got %v, want %d", got, n-1)
	}
}

// BenchmarkFeedPage: what a full-sync page costs the issuer to build,
// encode and sign (20,000 of 100,000 sessions held, 570 KiB): the cost
// the budget bounds. Each iteration is a new second, so nothing is kept
// and the budget is never spent.
func BenchmarkFeedPage(b *testing.B) {
	var clock atomic.Int64
	clock.Store(time.Unix(1_800_000_000, 0).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	_, priv, _ := ed25519.GenerateKey(nil)
	feed := revocation.NewFeed(revocation.FeedOptions{
		Set:    revocation.NewSet(revocation.SetOptions{TTL: ttl, Usable: true, Now: now}),
		Issuer: issuerName, Sign: signer(priv, "k1"), Logger: quiet, Now: now,
	})
	revocation.ReadForTest(feed, sessionRecords(1, 1, 100_000)...)
	req := httptest.NewRequest("GET", "/?since=s.100000.1.0", nil)
	b.ReportAllocs()
	for b.Loop() {
		clock.Add(int64(time.Second))
		w := httptest.NewRecorder()
		feed.ServeHTTP(w, req)
		if w.Code != 200 || w.Body.Len() < 500_000 {
			b.Fatalf("got %d, %d bytes, want a page", w.Code, w.Body.Len())
		}
	}
}

// TestFeedBusyVerifierSyncs: a verifier whose full sync finds the budget
// spent (503 FEED_BUSY) retries and completes it once builds are there
// again: a busy feed delays a sync, it does not break it.
func TestFeedBusyVerifierSyncs(t *testing.T) {
	// The feed's clock stands still from the moment the budget is spent
	// until the verifier has met FEED_BUSY, so nothing refills between.
	var frozen atomic.Int64
	now := func() time.Time {
		if ns := frozen.Load(); ns != 0 {
			return time.Unix(0, ns)
		}
		return time.Now()
	}
	is := newIssuerSideAt(t, filepath.Join(t.TempDir(), "auth.db"), now)
	const heads = revocation.BuildBurst + 8
	for range heads {
		if err := is.db.RevokeAll(context.Background(), time.Now().Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	within(t, 2*time.Second, "the issuer polling its revocations", func() bool {
		rec := httptest.NewRecorder()
		is.feed.ServeHTTP(rec, httptest.NewRequest("GET", fmt.Sprintf("/?since=s.%d.2.0", heads), nil))
		return rec.Code == 200
	})
	var busy atomic.Int64
	var spent sync.Once
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Before the verifier's first request, spend the budget on pages
		// of every real head.
		spent.Do(func() {
			frozen.Store(time.Now().UnixNano())
			for i := range heads {
				rec := httptest.NewRecorder()
				is.feed.ServeHTTP(rec, httptest.NewRequest("GET", fmt.Sprintf("/?since=s.%d.2.0", i+1), nil))
				if rec.Code == 503 {
					return
				}
			}
			t.Error("the budget was never spent")
		})
		rec := httptest.NewRecorder()
		is.feed.ServeHTTP(rec, r)
		if rec.Code == 503 && bytes.Contains(rec.Body.Bytes(), []byte("FEED_BUSY")) {
			busy.Add(1)
		}
		frozen.Store(0)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(front.Close) // after the client stops
	is.srv.URL = front.URL
	vset := revocation.NewSet(revocation.SetOptions{TTL: ttl})
	is.client(t, vset, time.Minute)
	within(t, 15*time.Second, "the verifier's sync through a spent budget", func() bool {
		return vset.Usable() && vset.GlobalCutoff() != 0
	})
	if busy.Load() == 0 {
		t.Error("the verifier never met FEED_BUSY: the budget was not spent when it asked")
	}
}
