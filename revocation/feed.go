package revocation

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
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
	// Metrics counts the answers built, shared and refused. Zero: not
	// counted.
	Metrics *Metrics
	// Logger; zero: slog.Default(). Now; zero: time.Now (the budget of
	// page builds runs on it too).
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

	// signed holds the signed answers of the current second that cost a
	// page build (feedcost.go), by their since, with the head each was
	// built at; flights the builds under way, which the same since joins.
	signed    map[string]signedPage
	signedSec int64
	flights   map[string]*flight
	// budget is the page builds left (feedcost.go).
	budget *rate.Limiter
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
	f := &Feed{o: o, moved: make(chan struct{}), polled: make(chan struct{}), flights: map[string]*flight{},
		budget: rate.NewLimiter(buildsPerSecond, buildBurst)}
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
		writeError(w, http.StatusBadRequest, "INVALID_CURSOR", "since: "+err.Error()+": send the cursor of the last answer as it came, or none for a full sync")
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
		f.o.Metrics.fed(nil, answerShared)
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
	if !f.await(ctx, cur, deadline) {
		writeUnavailable(w)
		return
	}
	tok, err := f.answer(r.Context(), since, cur)
	var busy *busyError
	switch {
	case err == nil:
		writeToken(w, tok)
	case errors.As(err, &busy):
		w.Header().Set("Retry-After", strconv.Itoa(int(max(time.Second, busy.retry.Round(time.Second))/time.Second)))
		writeError(w, http.StatusServiceUnavailable, "FEED_BUSY", "Revocation feed busy: too many pages asked for; retry")
	case errors.Is(err, errNotLoaded):
		writeUnavailable(w)
	case r.Context().Err() != nil:
		// The asker left while the build it waited for ran.
	default:
		f.o.Logger.Error("revocation feed: answer not signed", "error", err.Error())
		writeError(w, http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "Internal server error")
	}
}

// await waits until this process can answer cur, until deadline for an
// incremental cursor at its head (a long poll: until news comes). It
// returns false when it cannot answer (not loaded, or behind the cursor
// and not catching up). A cursor still ahead after two polls is let
// through: build answers it with a full sync.
func (f *Feed) await(ctx context.Context, cur cursor, deadline time.Time) bool {
	if cur.start {
		return true
	}
	// Asked past what this process has read: another replica answered
	// last. Let the poller catch up. If it has polled since the request
	// came and is still behind, the cursor is another database's.
	if caught, polled := f.catchUp(ctx, cur.id); !caught && !polled {
		return false
	}
	for !cur.full {
		f.mu.Lock()
		news := cur.id < f.floor || cur.id > f.head || (len(f.log) > 0 && f.log[len(f.log)-1].id > cur.id)
		moved := f.moved
		f.mu.Unlock()
		if news || !f.o.Now().Before(deadline) {
			return true
		}
		t := time.NewTimer(deadline.Sub(f.o.Now()))
		select {
		case <-moved:
		case <-t.C:
		case <-ctx.Done():
			deadline = f.o.Now()
		}
		t.Stop()
	}
	return true
}

// errNotLoaded: the poller's first poll is not in.
var errNotLoaded = errors.New("revocations not loaded yet")

// build makes the payload answering cur now: the page or the news it
// asks for, or a redirect to the real position it stands for. A page
// whose building costs (a full-sync page; news of more than freeEntries)
// is charged to the budget first, and says so (charged): it is kept for
// the rest of its second.
func (f *Feed) build(cur cursor) (p feedPayload, charged bool, err error) {
	f.mu.Lock()
	ready, head, floor, held := f.ready, f.head, f.floor, cur.id
	if !cur.start && cur.id >= floor && cur.id <= head {
		held = f.heldID(cur.id)
	}
	f.mu.Unlock()
	switch {
	case !ready:
		return p, false, errNotLoaded
	case cur.start:
		return f.fullPage(cursor{full: true, id: head, kind: KindSession}, true)
	case cur.id > head || cur.id < floor:
		return restart(head), false, nil
	case held != cur.id:
		next := cur
		next.id = held
		if cur.full {
			next.after = f.o.Set.KeyAtOrBelow(cur.kind, cur.after)
		}
		return redirect(next, false), false, nil
	case !cur.full:
		return f.news(cur.id)
	}
	if k := f.o.Set.KeyAtOrBelow(cur.kind, cur.after); k != cur.after {
		next := cur
		next.after = k
		return redirect(next, false), false, nil
	}
	return f.fullPage(cur, false)
}

// restart answers a cursor still ahead of this process after two polls
// (another database's) or behind what its log keeps (the news since
// cannot be told): a full sync, sent on to the first page at head, which
// everyone starting now shares, rather than a first page signed for this
// since alone.
func restart(head int64) feedPayload {
	return redirect(cursor{full: true, id: head, kind: KindSession}, true)
}

// news is the incremental answer from id on, charged when it holds more
// than freeEntries.
func (f *Feed) news(id int64) (feedPayload, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id < f.floor {
		// The log moved past it since build looked.
		return restart(f.head), false, nil
	}
	i := sort.Search(len(f.log), func(i int) bool { return f.log[i].id > id })
	if min(len(f.log)-i, pageSize) <= freeEntries {
		return f.incremental(i, id), false, nil
	}
	if err := f.charge(); err != nil {
		return feedPayload{}, false, err
	}
	return f.incremental(i, id), true, nil
}

// heldID is the real position an id stands for: the largest id at most
// id this process has read (news from there on is news from id on), or
// the floor. Called with f.mu held, for an id from floor to head.
func (f *Feed) heldID(id int64) int64 {
	i := sort.Search(len(f.log), func(i int) bool { return f.log[i].id > id })
	if i == 0 {
		return f.floor
	}
	return f.log[i-1].id
}

// redirect is an answer with no entries that sends the asker on to next
// at once (complete false); reset starts a full sync. It costs a small
// signature, not a page.
func redirect(next cursor, reset bool) feedPayload {
	return feedPayload{Reset: reset, Cursor: next.String(), Sessions: encodePairs(nil), Users: encodePairs(nil)}
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
// comes after, in the incremental answers from that head. It is charged
// to the budget before it is built.
func (f *Feed) fullPage(cur cursor, reset bool) (feedPayload, bool, error) {
	if err := f.charge(); err != nil {
		return feedPayload{}, false, err
	}
	p := feedPayload{Reset: reset}
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
		return p, true, nil
	}
	p.Cursor = next.String()
	return p, true, nil
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

func writeToken(w http.ResponseWriter, tok string) {
	h := w.Header()
	h.Set("Content-Type", "application/jwt")
	h.Set("Cache-Control", "no-store")
	w.Write([]byte(tok))
}

// writeUnavailable: this process cannot answer now; another replica, or
// this one in a moment, can.
func writeUnavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "REVOCATIONS_UNAVAILABLE", "Revocations not available here yet; retry")
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
