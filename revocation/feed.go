package revocation

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
)

// FeedOptions configures NewFeed.
type FeedOptions struct {
	// Set is the process's revocation set, which full syncs are read
	// from. Required.
	Set *Set
	// Issuer is the answers' iss: the JWT issuer, which verifiers expect.
	// Required.
	Issuer string
	// Sign signs a payload under the header typ FeedType with the key the
	// issuer signs JWTs with, without a store query. Required.
	Sign func(typ string, payload json.RawMessage) (string, error)
	// PollInterval is the poller's: a request ahead of this process (a
	// verifier that last asked another replica) waits this long, twice,
	// for it to catch up. Zero: 1s.
	PollInterval time.Duration
	// Logger; zero: slog.Default(). Now; zero: time.Now.
	Logger *slog.Logger
	Now    func() time.Time
}

// Feed serves GET /api/auth/revocations from memory (wire.go has the
// format): never a store query per request, whatever the verifiers ask.
// The Poller hands it every record it reads; it keeps the latest ones with
// their ids for incremental answers, and answers a full sync from the Set.
type Feed struct {
	o FeedOptions

	mu sync.Mutex
	// log holds the latest records read, in id order; every id above
	// floor is in it, so an incremental answer from floor on is complete.
	log   []logEntry
	floor int64
	head  int64 // the poller's cursor: every id up to it is in the Set
	ready bool  // the first poll is in
	polls uint64
	// moved is closed when head moves, polled at every poll; both are
	// replaced then.
	moved, polled chan struct{}
	// draining ends when the server starts shutting down (Drain): long
	// polls answer at once, so they do not hold the shutdown.
	draining  context.Context
	stopWaits context.CancelFunc

	// signed holds the signed full-sync answers of the current second by
	// their since, with the head each was built at: anyone may ask for a
	// full sync, and building and signing a 600 KiB page per request would
	// let a few clients spend the issuer's CPU (found in review). Within
	// one second the same answer serves everyone; its iat is that second.
	signed    map[string]signedPage
	signedSec int64
}

type signedPage struct {
	head int64
	tok  string
}

type logEntry struct {
	id int64
	e  Entry
}

// Feed sizes: the log keeps the last logSize records (32 bytes each, 2
// MiB), enough for a verifier that was away for minutes; one further
// behind gets a full sync. A page holds at most pageSize entries (16
// bytes each, base64 twice: about 600 KiB).
const (
	logSize  = 1 << 16
	pageSize = 20000
)

// NewFeed returns an empty feed; it answers 503 until its poller's first
// poll is in.
func NewFeed(o FeedOptions) *Feed {
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	f := &Feed{o: o, moved: make(chan struct{}), polled: make(chan struct{})}
	f.draining, f.stopWaits = context.WithCancel(context.Background())
	return f
}

// Drain makes every long poll, running or to come, answer at once with
// what it has: call it when shutdown starts, so that a verifier's open
// request (up to its wait, 25 s) does not hold the drain; the verifier
// asks again, of another replica.
func (f *Feed) Drain() { f.stopWaits() }

// append adds records the poller read, with their entries.
func (f *Feed) append(recs []Record, es []Entry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range recs {
		f.log = append(f.log, logEntry{r.ID, es[i]})
	}
	if n := len(f.log); n > logSize {
		keep := logSize / 2
		f.floor = f.log[n-keep-1].id
		f.log = append([]logEntry(nil), f.log[n-keep:]...)
	}
}

// synced records a poll that read up to head.
func (f *Feed) synced(head int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ready = true
	f.polls++
	close(f.polled)
	f.polled = make(chan struct{})
	if head != f.head {
		f.head = head
		close(f.moved)
		f.moved = make(chan struct{})
	}
}

// ServeHTTP answers one feed request; see wire.go.
func (f *Feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "Method not allowed")
		return
	}
	q := r.URL.Query()
	since := q.Get("since")
	cur, err := parseCursor(since)
	if err != nil {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "since: "+err.Error())
		return
	}
	wait := time.Duration(0)
	if s := q.Get("wait"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 60 {
			writeError(w, http.StatusBadRequest, "BAD_REQUEST", "wait: want whole seconds from 0 to 60")
			return
		}
		wait = time.Duration(n) * time.Second
	}
	if tok, ok := f.cachedPage(since, f.o.Now().Unix()); ok {
		writeToken(w, tok)
		return
	}
	// Answer before the request's own deadline (the proxy bounds auth
	// requests), with room to write.
	deadline := f.o.Now().Add(wait)
	if d, ok := r.Context().Deadline(); ok && d.Add(-250*time.Millisecond).Before(deadline) {
		deadline = d.Add(-250 * time.Millisecond)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(f.draining, cancel)()
	p, ok := f.answer(ctx, cur, deadline)
	if !ok {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "REVOCATIONS_UNAVAILABLE", "Revocations not available here yet; retry")
		return
	}
	now := f.o.Now()
	p.Iss, p.Aud, p.Iat, p.Exp, p.Since = f.o.Issuer, feedAudience, now.Unix(), now.Unix()+feedLifetime, since
	body, err := json.Marshal(p)
	if err == nil {
		var tok string
		if tok, err = f.o.Sign(FeedType, body); err == nil {
			if p.full {
				f.keepPage(since, now.Unix(), tok)
			}
			writeToken(w, tok)
			return
		}
	}
	f.o.Logger.Error("revocation feed: answer not signed", "error", err.Error())
	writeError(w, http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "Internal server error")
}

// answer builds the payload for cur, waiting until deadline for news when
// there is none; ok is false when this process cannot answer (not loaded,
// or behind the cursor and not catching up).
func (f *Feed) answer(ctx context.Context, cur cursor, deadline time.Time) (feedPayload, bool) {
	if !cur.full || !cur.start {
		// Asked past what this process has read: another replica answered
		// last. Let the poller catch up. If it has polled since the request
		// came and is still behind, an incremental cursor is another
		// database's: start over.
		switch caught, polled := f.catchUp(ctx, cur.id); {
		case caught:
		case polled && !cur.full:
			cur = cursor{full: true, start: true}
		default:
			return feedPayload{}, false
		}
	}
	if cur.full {
		return f.fullPage(cur)
	}
	for {
		f.mu.Lock()
		if cur.id < f.floor {
			f.mu.Unlock()
			return f.fullPage(cursor{full: true, start: true})
		}
		i := sort.Search(len(f.log), func(i int) bool { return f.log[i].id > cur.id })
		moved := f.moved
		if i < len(f.log) || !f.o.Now().Before(deadline) {
			p := f.incremental(i, cur.id)
			f.mu.Unlock()
			return p, true
		}
		f.mu.Unlock()
		t := time.NewTimer(deadline.Sub(f.o.Now()))
		select {
		case <-moved:
		case <-t.C:
		case <-ctx.Done():
			deadline = f.o.Now()
		}
		t.Stop()
	}
}

// incremental is the answer from log[i:] on. Called with f.mu held.
func (f *Feed) incremental(i int, since int64) feedPayload {
	page := f.log[i:min(len(f.log), i+pageSize)]
	var sess, users []Entry
	var all int64
	for _, le := range page {
		switch le.e.Kind {
		case KindSession:
			sess = append(sess, le.e)
		case KindUser:
			users = append(users, le.e)
		case KindAll:
			all = max(all, le.e.At)
		}
	}
	p := feedPayload{Complete: i+len(page) == len(f.log), All: all, Sessions: encodePairs(sess), Users: encodePairs(users)}
	switch {
	case !p.Complete:
		p.Cursor = strconv.FormatInt(page[len(page)-1].id, 10)
	default:
		p.Cursor = strconv.FormatInt(max(since, f.head), 10)
	}
	return p
}

// fullPage is one page of a full sync: sessions, then users, then the
// global cutoff with the end. Each page is read from the Set as it is
// then: every revocation up to the sync's head is in it, as the poller
// adds to the set before it moves the head; what came since is in it or
// comes after, in the incremental answers from that head.
func (f *Feed) fullPage(cur cursor) (feedPayload, bool) {
	f.mu.Lock()
	ready, head := f.ready, f.head
	f.mu.Unlock()
	if !ready {
		return feedPayload{}, false
	}
	p := feedPayload{Reset: cur.start, full: true}
	if cur.start {
		cur = cursor{full: true, id: head, kind: KindSession}
	}
	es, more := f.o.Set.Page(cur.kind, cur.after, pageSize)
	if cur.kind == KindSession {
		p.Sessions = encodePairs(es)
	} else {
		p.Users = encodePairs(es)
	}
	next := cur
	switch {
	case more:
		next.after = es[len(es)-1].Key
	case cur.kind == KindSession:
		next.kind, next.after = KindUser, 0
	default:
		p.Complete, p.All = true, f.o.Set.GlobalCutoff()
		p.Cursor = strconv.FormatInt(cur.id, 10)
		return p, true
	}
	p.Cursor = next.String()
	return p, true
}

// catchUp waits, for at most two poll intervals, until this process has
// read up to id. polled reports that it has completed a poll that began
// after the call: a read of everything visible then.
func (f *Feed) catchUp(ctx context.Context, id int64) (caught, polled bool) {
	limit := time.NewTimer(2*f.o.PollInterval + 500*time.Millisecond)
	defer limit.Stop()
	polls := 0
	for {
		f.mu.Lock()
		caught, next := f.ready && f.head >= id, f.polled
		f.mu.Unlock()
		// The first poll to end may have begun before the call.
		if caught || polls == 2 {
			return caught, polls == 2
		}
		select {
		case <-next:
			polls++
		case <-limit.C:
			return false, false
		case <-ctx.Done():
			return false, false
		}
	}
}

// cachedPage returns the signed full-sync answer for since made this
// second, if it was built at the head there is now or a later one.
func (f *Feed) cachedPage(since string, sec int64) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.signedSec != sec {
		return "", false
	}
	sp, ok := f.signed[since]
	if !ok || sp.head < f.head {
		return "", false
	}
	return sp.tok, true
}

// keepPage remembers a signed full-sync answer for the rest of sec.
func (f *Feed) keepPage(since string, sec int64, tok string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.signedSec != sec || len(f.signed) >= maxSignedPages {
		f.signed, f.signedSec = map[string]signedPage{}, sec
	}
	f.signed[since] = signedPage{head: f.head, tok: tok}
}

// maxSignedPages bounds the answers kept for one second (a full sync of a
// million revocations is about 100 pages).
const maxSignedPages = 256

func writeToken(w http.ResponseWriter, tok string) {
	h := w.Header()
	h.Set("Content-Type", "application/jwt")
	h.Set("Cache-Control", "no-store")
	w.Write([]byte(tok))
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	b, _ := json.Marshal(struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	}{message, code})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}
