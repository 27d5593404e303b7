package mail

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/authsidecar/authsidecar/internal/mailtest"
	"github.com/authsidecar/authsidecar/internal/syncbuf"
)

const testSecret = "worker-test-secret-of-some-length"

// fakeClock is an injected clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// sendFunc is a Sender made of a function.
type sendFunc func(ctx context.Context, m Message, id string) error

func (f sendFunc) Send(ctx context.Context, m Message, id string) error { return f(ctx, m, id) }

// recorder is a Sender that records what it is given and answers with err.
type recorder struct {
	mu   sync.Mutex
	sent []string // ids, in order
	msgs []Message
	err  error
}

func (r *recorder) Send(ctx context.Context, m Message, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, id)
	r.msgs = append(r.msgs, m)
	return r.err
}

func (r *recorder) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.sent...)
}

// eventually waits up to 5s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// syncBuffer is a log sink safe for the worker's goroutine.
type syncBuffer = syncbuf.Buffer

// testWorker fills in what a test does not set and returns the worker,
// its registry and its log.
func testWorker(t *testing.T, o WorkerOptions) (*Worker, *prometheus.Registry, *syncBuffer) {
	t.Helper()
	reg := prometheus.NewRegistry()
	logs := &syncBuffer{}
	if o.Box == nil {
		o.Box = mustBox(t, testSecret)
	}
	if o.Delivery == "" {
		o.Delivery = "webhook"
	}
	if o.PollInterval == 0 {
		o.PollInterval = time.Hour // tests drive the worker with Kick
	}
	o.Registerer = reg
	o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w, err := NewWorker(o)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	return w, reg, logs
}

// run starts w.Run and returns a function that stops it and waits.
func run(t *testing.T, w *Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after its ctx ended")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i, lp := range m.GetLabel() {
				if i*2+1 >= len(labels) || lp.GetName() != labels[i*2] || lp.GetValue() != labels[i*2+1] {
					continue metric
				}
			}
			if m.Counter != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

func TestWorkerDeliversOnce(t *testing.T) {
	clock := newFakeClock()
	q := newMemQueue()
	rec := &recorder{}
	w, reg, logs := testWorker(t, WorkerOptions{Queue: q, Sender: rec, Now: clock.Now, Batch: 2})
	box := mustBox(t, testSecret)
	var ids []string
	for i, k := range []Kind{PasswordReset, EmailVerification, PasswordReset} {
		m := sampleMessage(k)
		m.To = string(rune('a'+i)) + "@example.com"
		ids = append(ids, q.add(t, box, m, clock.Now()))
		w.Queued(k)
	}
	run(t, w)
	eventually(t, "3 acks", func() bool { a, _ := q.counts(); return a == 3 })
	// More polls find nothing more to do.
	for range 3 {
		w.Kick()
		time.Sleep(10 * time.Millisecond)
	}
	if got := rec.ids(); len(got) != 3 {
		t.Fatalf("sent %v, want each of %v once", got, ids)
	}
	seen := map[string]int{}
	for _, id := range rec.ids() {
		seen[id]++
	}
	for _, id := range ids {
		r := q.row(id)
		if seen[id] != 1 || r.State != StateDelivered || r.Sealed != nil || !r.DeliveredAt.Equal(clock.Now()) {
			t.Errorf("row %s: sent %d times, state %s, sealed %d bytes, delivered at %v", id, seen[id], r.State, len(r.Sealed), r.DeliveredAt)
		}
	}
	if a, f := q.counts(); a != 3 || f != 0 {
		t.Errorf("acks %d, fails %d; want 3, 0", a, f)
	}
	for _, c := range []struct {
		name, typ string
		want      float64
	}{
		{"authsidecar_mail_queued_total", "password_reset", 2},
		{"authsidecar_mail_queued_total", "email_verification", 1},
		{"authsidecar_mail_delivered_total", "password_reset", 2},
		{"authsidecar_mail_delivered_total", "email_verification", 1},
		{"authsidecar_mail_failed_attempts_total", "password_reset", 0},
		{"authsidecar_mail_dead_total", "password_reset", 0},
	} {
		labels := []string{"type", c.typ}
		if c.name != "authsidecar_mail_queued_total" {
			labels = []string{"delivery", "webhook", "type", c.typ}
		}
		if got := counter(t, reg, c.name, labels...); got != c.want {
			t.Errorf("%s{type=%s}: got %v, want %v", c.name, c.typ, got, c.want)
		}
	}
	if strings.Contains(logs.String(), "Tok3n") {
		t.Errorf("the log holds the link:\n%s", logs)
	}
}

// TestWorkerBackoffAndDead: a message that keeps failing is retried at
// growing, bounded, jittered delays and marked dead after MaxAttempts.
func TestWorkerBackoffAndDead(t *testing.T) {
	clock := newFakeClock()
	q := newMemQueue()
	m := sampleMessage(PasswordReset)
	rec := &recorder{err: errors.New("550 mailbox unavailable for " + m.URL)}
	const maxAttempts = 7
	base, maxDelay := 10*time.Second, 2*time.Minute
	w, reg, logs := testWorker(t, WorkerOptions{
		Queue: q, Sender: rec, Now: clock.Now,
		MaxAttempts: maxAttempts, BackoffBase: base, BackoffMax: maxDelay,
	})
	id := q.add(t, mustBox(t, testSecret), m, clock.Now())
	run(t, w)
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		w.Kick()
		eventually(t, "the attempt recorded", func() bool { _, f := q.counts(); return f == attempt })
		r := q.row(id)
		if r.Attempts != attempt {
			t.Fatalf("attempt %d: row has %d attempts", attempt, r.Attempts)
		}
		if r.State == StateDead {
			break
		}
		// Between attempts nothing happens, however often it is kicked.
		w.Kick()
		time.Sleep(5 * time.Millisecond)
		if _, f := q.counts(); f != attempt {
			t.Fatalf("attempt %d: retried before its time", attempt)
		}
		clock.Set(r.NextAttemptAt)
	}
	calls := q.failHistory()
	if len(calls) != maxAttempts {
		t.Fatalf("got %d failed attempts, want %d", len(calls), maxAttempts)
	}
	var prev time.Duration
	for i, c := range calls[:maxAttempts-1] {
		d := c.next.Sub(c.now)
		ceil := min(base<<i, maxDelay)
		if d < ceil/2 || d > ceil {
			t.Errorf("attempt %d: delay %v, want in [%v, %v]", i+1, d, ceil/2, ceil)
		}
		if d < prev/2 {
			t.Errorf("attempt %d: delay %v shrank from %v", i+1, d, prev)
		}
		prev = d
		if c.dead {
			t.Errorf("attempt %d marked dead, want only attempt %d", i+1, maxAttempts)
		}
		if strings.Contains(c.lastErr, "Tok3n") || !strings.Contains(c.lastErr, "550 mailbox unavailable for [link]") {
			t.Errorf("last_error %q: want the cause with the link redacted", c.lastErr)
		}
	}
	if last := calls[maxAttempts-1]; !last.dead {
		t.Errorf("attempt %d not marked dead", maxAttempts)
	}
	r := q.row(id)
	if r.State != StateDead || r.Sealed != nil {
		t.Errorf("row: state %s, %d payload bytes; want dead, none", r.State, len(r.Sealed))
	}
	if n := len(rec.ids()); n != maxAttempts {
		t.Errorf("sent %d times, want %d", n, maxAttempts)
	}
	if got := counter(t, reg, "authsidecar_mail_failed_attempts_total", "delivery", "webhook", "type", "password_reset"); got != maxAttempts {
		t.Errorf("failed attempts: got %v, want %d", got, maxAttempts)
	}
	if got := counter(t, reg, "authsidecar_mail_dead_total", "delivery", "webhook", "type", "password_reset"); got != 1 {
		t.Errorf("dead: got %v, want 1", got)
	}
	if strings.Contains(logs.String(), "Tok3n") {
		t.Errorf("the log holds the link:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "marked dead") {
		t.Errorf("no log line for the dead message:\n%s", logs)
	}
}

func TestBackoffBounds(t *testing.T) {
	w := &Worker{base: time.Second, max: 100 * time.Second}
	tests := []struct {
		attempt int
		ceil    time.Duration
	}{
		{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {7, 64 * time.Second},
		{8, 100 * time.Second}, {9, 100 * time.Second}, {1000, 100 * time.Second},
	}
	for _, tt := range tests {
		lo, hi := tt.ceil, time.Duration(0)
		for range 2000 {
			d := w.backoff(tt.attempt)
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo < tt.ceil/2 || hi > tt.ceil {
			t.Errorf("attempt %d: delays in [%v, %v], want within [%v, %v]", tt.attempt, lo, hi, tt.ceil/2, tt.ceil)
		}
		// Jitter: the draws spread over most of the range.
		if hi-lo < tt.ceil/4 {
			t.Errorf("attempt %d: delays in [%v, %v]: no jitter to speak of", tt.attempt, lo, hi)
		}
	}
}

// TestWorkerUnopenableIsDead: a payload sealed under another secret, or
// for another row, is dead at once, never sent, and logged without the
// secret or the payload.
// TestWorkerUnopenableIsRetriedThenDead: a payload this process cannot
// open (another AUTH_SECRET, a payload moved from another row, a kind
// that disagrees) is retried like a failed send, since a replica holding
// the right secret may still deliver it, and dead after MaxAttempts.
func TestWorkerUnopenableIsRetriedThenDead(t *testing.T) {
	clock := newFakeClock()
	q := newMemQueue()
	rec := &recorder{}
	w, reg, logs := testWorker(t, WorkerOptions{Queue: q, Sender: rec, Now: clock.Now, MaxAttempts: 2})
	other := mustBox(t, "a-rotated-secret-nobody-told-us-about")
	m := sampleMessage(EmailVerification)
	wrongSecret := q.add(t, other, m, clock.Now())
	// A payload moved from another row.
	moved := NewID()
	sealed, _ := mustBox(t, testSecret).Seal(NewID(), m)
	q.addRaw(Queued{ID: moved, Kind: m.Kind, Sealed: sealed, State: StatePending, CreatedAt: clock.Now(), NextAttemptAt: clock.Now()})
	// A row whose kind disagrees with its payload.
	mismatch := NewID()
	sealed, _ = mustBox(t, testSecret).Seal(mismatch, m)
	q.addRaw(Queued{ID: mismatch, Kind: PasswordReset, Sealed: sealed, State: StatePending, CreatedAt: clock.Now(), NextAttemptAt: clock.Now()})
	run(t, w)
	eventually(t, "3 rows failed once", func() bool { _, f := q.counts(); return f == 3 })
	for _, id := range []string{wrongSecret, moved, mismatch} {
		r := q.row(id)
		if r.State != StatePending || r.Sealed == nil || r.Attempts != 1 {
			t.Errorf("row %s after one attempt: state %s, %d payload bytes, %d attempts; want pending, kept for a retry", id, r.State, len(r.Sealed), r.Attempts)
		}
	}
	clock.Add(time.Hour)
	w.Kick()
	eventually(t, "3 rows failed twice", func() bool { _, f := q.counts(); return f == 6 })
	for _, id := range []string{wrongSecret, moved, mismatch} {
		r := q.row(id)
		if r.State != StateDead || r.Sealed != nil || r.Attempts != 2 {
			t.Errorf("row %s: state %s, %d payload bytes, %d attempts; want dead after MaxAttempts", id, r.State, len(r.Sealed), r.Attempts)
		}
	}
	if n := len(rec.ids()); n != 0 {
		t.Errorf("sent %d messages, want 0", n)
	}
	if got := counter(t, reg, "authsidecar_mail_dead_total", "delivery", "webhook", "type", "email_verification"); got != 2 {
		t.Errorf("dead{email_verification}: got %v, want 2", got)
	}
	if got := counter(t, reg, "authsidecar_mail_dead_total", "delivery", "webhook", "type", "password_reset"); got != 1 {
		t.Errorf("dead{password_reset}: got %v, want 1", got)
	}
	if got := counter(t, reg, "authsidecar_mail_failed_attempts_total", "delivery", "webhook", "type", "email_verification"); got != 4 {
		t.Errorf("failed attempts{email_verification}: got %v, want 4", got)
	}
	l := logs.String()
	for _, s := range []string{testSecret, "a-rotated-secret", "Tok3n", m.To} {
		if strings.Contains(l, s) {
			t.Errorf("the log holds %q:\n%s", s, l)
		}
	}
	if strings.Count(l, "mail payload unreadable") != 6 {
		t.Errorf("want 6 'unreadable' log lines:\n%s", l)
	}
}

func TestWorkerExpiredLinkIsDead(t *testing.T) {
	clock := newFakeClock()
	q := newMemQueue()
	rec := &recorder{}
	w, reg, _ := testWorker(t, WorkerOptions{Queue: q, Sender: rec, Now: clock.Now})
	m := sampleMessage(PasswordReset)
	m.TokenExpiresAt = clock.Now()
	id := q.add(t, mustBox(t, testSecret), m, clock.Now().Add(-time.Hour))
	run(t, w)
	eventually(t, "the row failed", func() bool { _, f := q.counts(); return f == 1 })
	if r := q.row(id); r.State != StateDead || r.LastError != "link expired before delivery" {
		t.Errorf("row: state %s, last error %q", r.State, r.LastError)
	}
	if len(rec.ids()) != 0 {
		t.Error("an expired link was sent")
	}
	if got := counter(t, reg, "authsidecar_mail_dead_total", "delivery", "webhook", "type", "password_reset"); got != 1 {
		t.Errorf("dead: got %v, want 1", got)
	}
}

// TestWorkerKick: with a poll interval of an hour, a kick delivers at once.
func TestWorkerKick(t *testing.T) {
	q := newMemQueue()
	rec := &recorder{}
	w, _, _ := testWorker(t, WorkerOptions{Queue: q, Sender: rec, PollInterval: time.Hour})
	run(t, w)
	time.Sleep(20 * time.Millisecond) // the first poll found nothing; the worker sleeps
	id := q.add(t, mustBox(t, testSecret), sampleMessage(PasswordReset), time.Now())
	time.Sleep(100 * time.Millisecond)
	if n := len(rec.ids()); n != 0 {
		t.Fatalf("sent %d before any kick (the test relies on the worker sleeping)", n)
	}
	start := time.Now()
	w.Kick()
	eventually(t, "delivery after a kick", func() bool { return q.row(id).State == StateDelivered })
	t.Logf("delivered %v after the kick", time.Since(start))
}

// TestWorkerPollInterval: without a kick, a row is found at the next poll.
func TestWorkerPollInterval(t *testing.T) {
	q := newMemQueue()
	rec := &recorder{}
	w, _, _ := testWorker(t, WorkerOptions{Queue: q, Sender: rec, PollInterval: 20 * time.Millisecond})
	run(t, w)
	id := q.add(t, mustBox(t, testSecret), sampleMessage(PasswordReset), time.Now())
	eventually(t, "delivery at a poll", func() bool { return q.row(id).State == StateDelivered })
}

// TestWorkerLeaseLost: when another replica took the row meanwhile, the
// worker neither crashes nor records over it, and goes on with the next.
func TestWorkerLeaseLost(t *testing.T) {
	for _, fail := range []bool{false, true} {
		name := map[bool]string{false: "on ack", true: "on fail"}[fail]
		t.Run(name, func(t *testing.T) {
			clock := newFakeClock()
			q := newMemQueue()
			box := mustBox(t, testSecret)
			first := q.add(t, box, sampleMessage(PasswordReset), clock.Now())
			var sent atomic.Int32
			sender := sendFunc(func(ctx context.Context, m Message, id string) error {
				sent.Add(1)
				if id == first {
					q.steal(id)
					if fail {
						return errors.New("503")
					}
				}
				return nil
			})
			w, reg, logs := testWorker(t, WorkerOptions{Queue: q, Sender: sender, Now: clock.Now, Batch: 1})
			run(t, w)
			eventually(t, "the first send", func() bool { return sent.Load() == 1 })
			second := q.add(t, box, sampleMessage(EmailVerification), clock.Now())
			w.Kick()
			eventually(t, "the next message delivered", func() bool { return q.row(second).State == StateDelivered })
			r := q.row(first)
			if r.State != StatePending || r.owner != "another-replica" || r.Attempts != 1 || r.Sealed == nil { // 1: our claim's
				t.Errorf("stolen row: state %s, owner %s, attempts %d: the worker wrote over another owner's lease", r.State, r.owner, r.Attempts)
			}
			if !strings.Contains(logs.String(), "lease was lost") {
				t.Errorf("no log line about the lost lease:\n%s", logs)
			}
			dead := counter(t, reg, "authsidecar_mail_dead_total", "delivery", "webhook", "type", "password_reset")
			if dead != 0 {
				t.Errorf("dead: got %v, want 0", dead)
			}
		})
	}
}

// TestWorkerBatchGivesBackWhenLeaseLapses: rows of a batch are only sent
// while the lease is held; when renewals fail (the database unreachable)
// the lease lapses, and the rest is given back untried instead of sent
// while another process may claim it.
func TestWorkerBatchGivesBackWhenLeaseLapses(t *testing.T) {
	clock := newFakeClock()
	q := newMemQueue()
	q.setRenewErr(errors.New("database unreachable"))
	box := mustBox(t, testSecret)
	// Lease 30s, not renewed; a send starts only while at least a third
	// of the lease (10s) is left. Each send takes 10s of clock: sends at
	// t=0 and 10s, none at 20s.
	var sent atomic.Int32
	sender := sendFunc(func(ctx context.Context, m Message, id string) error {
		sent.Add(1)
		clock.Add(10 * time.Second)
		return nil
	})
	w, _, logs := testWorker(t, WorkerOptions{Queue: q, Sender: sender, Now: clock.Now, Batch: 5, Lease: 30 * time.Second})
	var ids []string
	for range 5 {
		ids = append(ids, q.add(t, box, sampleMessage(PasswordReset), clock.Now()))
	}
	stop := run(t, w)
	eventually(t, "the batch handled", func() bool { return strings.Contains(logs.String(), "given back") })
	stop()
	if got := sent.Load(); got != 2 {
		t.Errorf("sent %d of the batch, want 2 (at t=0 and 10s)", got)
	}
	given := 0
	for _, id := range ids {
		if r := q.row(id); r.State == StatePending && r.owner == "" && r.Attempts == 0 {
			given++
		}
	}
	if given != 3 || q.releases != 3 {
		t.Errorf("given back %d rows (%d releases), want 3, untried and unleased", given, q.releases)
	}
}

// TestWorkerRenewsLeaseDuringLongBatch: a batch that takes longer than the
// lease keeps its rows: the worker renews the lease while it sends, so no
// other process can claim them meanwhile, and every row is sent once.
func TestWorkerRenewsLeaseDuringLongBatch(t *testing.T) {
	q := newMemQueue()
	box := mustBox(t, testSecret)
	const lease = 300 * time.Millisecond
	var stolen atomic.Int32
	sender := sendFunc(func(ctx context.Context, m Message, id string) error {
		// Each send outlasts half the lease; meanwhile another process
		// tries to claim.
		for range 4 {
			time.Sleep(lease / 8)
			if got, _ := q.ClaimOutbox(ctx, "another-process", 10, lease, time.Now()); len(got) > 0 {
				stolen.Add(int32(len(got)))
			}
		}
		return nil
	})
	w, _, _ := testWorker(t, WorkerOptions{Queue: q, Sender: sender, Batch: 5, Lease: lease})
	var ids []string
	for range 5 {
		ids = append(ids, q.add(t, box, sampleMessage(PasswordReset), time.Now().Add(-time.Second)))
	}
	run(t, w)
	eventually(t, "the batch delivered", func() bool { a, _ := q.counts(); return a == 5 })
	if n := stolen.Load(); n != 0 {
		t.Errorf("another process claimed %d rows of a live worker's batch", n)
	}
	if q.renewCount() == 0 {
		t.Error("a batch of 5 × 150ms under a 300ms lease was never renewed")
	}
	for _, id := range ids {
		if r := q.row(id); r.State != StateDelivered || r.Attempts != 1 {
			t.Errorf("row %s: state %s, attempts %d; want delivered at its first attempt", id, r.State, r.Attempts)
		}
	}
}

// TestWorkerMessageThatKillsTheProcess: a claim is an attempt, so a message
// whose every try ends the process delivering it (nothing recorded) is
// claimed MaxAttempts times, then marked dead unsent at the next claim,
// instead of being claimed forever.
func TestWorkerMessageThatKillsTheProcess(t *testing.T) {
	clock := newFakeClock()
	q := newMemQueue()
	const maxAttempts, lease = 3, 10 * time.Second
	id := q.add(t, mustBox(t, testSecret), sampleMessage(PasswordReset), clock.Now())
	for i := 1; i <= maxAttempts; i++ {
		if got := q.crashClaim(t, 1, lease, clock.Now()); len(got) != 1 || got[0].Attempts != i {
			t.Fatalf("claim %d by a process that then dies: got %+v", i, got)
		}
		clock.Add(lease) // its lease ends; nobody recorded anything
	}
	rec := &recorder{}
	w, reg, logs := testWorker(t, WorkerOptions{Queue: q, Sender: rec, Now: clock.Now, MaxAttempts: maxAttempts, Lease: lease})
	run(t, w)
	w.Kick()
	eventually(t, "the message dead", func() bool { return q.row(id).State == StateDead })
	if n := len(rec.ids()); n != 0 {
		t.Errorf("sent %d times, want none: the message is past its last attempt", n)
	}
	r := q.row(id)
	if r.Sealed != nil || !strings.Contains(r.LastError, "without an outcome") {
		t.Errorf("dead row: %d payload bytes, last error %q", len(r.Sealed), r.LastError)
	}
	if got := counter(t, reg, "authsidecar_mail_dead_total", "delivery", "webhook", "type", "password_reset"); got != 1 {
		t.Errorf("dead: got %v, want 1", got)
	}
	if !strings.Contains(logs.String(), "out of attempts") {
		t.Errorf("no log line for it:\n%s", logs)
	}
}

// TestWorkerGracefulStop: ending Run's ctx lets the send in flight finish
// (its ctx is not cancelled) and records its outcome before Run returns.
func TestWorkerGracefulStop(t *testing.T) {
	q := newMemQueue()
	id := q.add(t, mustBox(t, testSecret), sampleMessage(PasswordReset), time.Now())
	inSend, release := make(chan struct{}), make(chan struct{})
	var sendCtxErr atomic.Pointer[error]
	sender := sendFunc(func(ctx context.Context, m Message, id string) error {
		close(inSend)
		<-release
		err := ctx.Err()
		sendCtxErr.Store(&err)
		return nil
	})
	w, _, _ := testWorker(t, WorkerOptions{Queue: q, Sender: sender})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-inSend
	cancel()
	select {
	case <-done:
		t.Fatal("Run returned with a send in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the send finished")
	}
	if err := sendCtxErr.Load(); err == nil || *err != nil {
		t.Errorf("the send's ctx ended with Run's: %v", err)
	}
	if r := q.row(id); r.State != StateDelivered {
		t.Errorf("row state %s, want delivered: the outcome of the last send was lost", r.State)
	}
}

// TestWorkerStopReleasesTheRestOfTheBatch: rows claimed with the one in
// flight but not tried go back at the stop, due at once and with no
// attempt counted, instead of staying leased until the lease ends.
func TestWorkerStopReleasesTheRestOfTheBatch(t *testing.T) {
	q := newMemQueue()
	box := mustBox(t, testSecret)
	var ids []string
	for range 3 {
		ids = append(ids, q.add(t, box, sampleMessage(PasswordReset), time.Now().Add(-time.Second)))
	}
	inSend, release := make(chan struct{}), make(chan struct{})
	var sent atomic.Int32
	sender := sendFunc(func(ctx context.Context, m Message, id string) error {
		if sent.Add(1) == 1 {
			close(inSend)
			<-release
		}
		return nil
	})
	w, _, _ := testWorker(t, WorkerOptions{Queue: q, Sender: sender, Batch: 3})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-inSend
	cancel()
	close(release)
	<-done
	if n := sent.Load(); n != 1 {
		t.Fatalf("%d sends after the stop began, want only the one in flight", n)
	}
	delivered, released := 0, 0
	for _, id := range ids {
		switch r := q.row(id); {
		case r.State == StateDelivered:
			delivered++
		case r.State == StatePending && r.owner == "" && r.Attempts == 0:
			released++
		default:
			t.Errorf("row %s: state %s, owner %q, attempts %d", id, r.State, r.owner, r.Attempts)
		}
	}
	if delivered != 1 || released != 2 || q.releases != 2 {
		t.Errorf("delivered %d, released %d (%d release calls); want 1 and 2", delivered, released, q.releases)
	}
}

// TestWorkerStopWaitsAtMostSendTimeout: a send that never returns by
// itself holds the stop for SendTimeout, then counts as a failed attempt.
func TestWorkerStopWaitsAtMostSendTimeout(t *testing.T) {
	q := newMemQueue()
	id := q.add(t, mustBox(t, testSecret), sampleMessage(PasswordReset), time.Now())
	inSend := make(chan struct{})
	sender := sendFunc(func(ctx context.Context, m Message, id string) error {
		close(inSend)
		<-ctx.Done()
		return ctx.Err()
	})
	w, _, _ := testWorker(t, WorkerOptions{Queue: q, Sender: sender, Lease: time.Second, SendTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-inSend
	start := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("stop took %v with a 300ms send timeout", took)
	}
	if r := q.row(id); r.State != StatePending || r.Attempts != 1 || !strings.Contains(r.LastError, "deadline exceeded") {
		t.Errorf("row: state %s, attempts %d, last error %q; want a recorded timeout", r.State, r.Attempts, r.LastError)
	}
}

// TestWorkerReceiverDownThenUp: with a real webhook sender, a receiver
// that is down (nothing listening, then 503s) and comes back gets each
// message exactly once, and every attempt carried the same webhook-id.
func TestWorkerReceiverDownThenUp(t *testing.T) {
	secret := mailtest.NewWebhookSecret(t)
	recv := mailtest.NewWebhookReceiver(t, secret)
	recv.SetStatus(func(int) int { return http.StatusServiceUnavailable })
	recv.Down() // "down" is nothing listening there
	sender, err := NewWebhook(WebhookOptions{URL: recv.URL, Secret: secret, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	q := newMemQueue()
	w, reg, _ := testWorker(t, WorkerOptions{
		Queue: q, Sender: sender, PollInterval: 10 * time.Millisecond,
		BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, MaxAttempts: 1000,
	})
	box := mustBox(t, testSecret)
	ids := []string{
		q.add(t, box, sampleMessage(PasswordReset), time.Now()),
		q.add(t, box, sampleMessage(EmailVerification), time.Now()),
	}
	run(t, w)
	eventually(t, "failed attempts while nothing listens", func() bool {
		return q.row(ids[0]).Attempts >= 2 && q.row(ids[1]).Attempts >= 2
	})

	// The receiver comes up, answering 503 for a while.
	recv.Up()
	eventually(t, "503s seen by the receiver", func() bool {
		seen := map[string]int{}
		for _, h := range recv.Requests() {
			seen[h.ID]++
		}
		return seen[ids[0]] >= 2 && seen[ids[1]] >= 2
	})
	recv.SetStatus(nil)
	eventually(t, "both delivered", func() bool {
		return q.row(ids[0]).State == StateDelivered && q.row(ids[1]).State == StateDelivered
	})
	time.Sleep(100 * time.Millisecond) // ten more polls
	if rejected := recv.Rejected(); len(rejected) != 0 {
		t.Errorf("receiver rejected %v", rejected)
	}
	accepted := recv.Deliveries()
	for _, id := range ids {
		if n := len(accepted[id]); n != 1 {
			t.Errorf("message %s accepted %d times, want exactly once", id, n)
		}
	}
	for _, h := range recv.Requests() {
		if h.ID != ids[0] && h.ID != ids[1] {
			t.Errorf("a request with webhook-id %q, not one of the messages'", h.ID)
		}
	}
	if got := counter(t, reg, "authsidecar_mail_delivered_total", "delivery", "webhook", "type", "password_reset"); got != 1 {
		t.Errorf("delivered{password_reset}: got %v, want 1", got)
	}
	t.Logf("attempts before delivery: %d and %d", q.row(ids[0]).Attempts, q.row(ids[1]).Attempts)
}

// TestWorkerMetricsAtStartup: every series exists at 0 before anything
// happened, and the oldest-pending age follows the clock.
func TestWorkerMetricsAtStartup(t *testing.T) {
	clock := newFakeClock()
	q := newMemQueue()
	w, reg, _ := testWorker(t, WorkerOptions{Queue: q, Sender: &recorder{err: errors.New("down")}, Now: clock.Now, Delivery: "smtp"})
	want := `
# HELP authsidecar_mail_dead_total Messages given up (email.max_attempts reached, link expired before delivery, or payload unreadable), by type and delivery.
# TYPE authsidecar_mail_dead_total counter
authsidecar_mail_dead_total{delivery="smtp",type="email_verification"} 0
authsidecar_mail_dead_total{delivery="smtp",type="password_reset"} 0
# HELP authsidecar_mail_delivered_total Messages the receiving end accepted (SMTP server, webhook 2xx, log), by type and delivery.
# TYPE authsidecar_mail_delivered_total counter
authsidecar_mail_delivered_total{delivery="smtp",type="email_verification"} 0
authsidecar_mail_delivered_total{delivery="smtp",type="password_reset"} 0
# HELP authsidecar_mail_failed_attempts_total Delivery attempts that failed and were rescheduled or given up, by type and delivery.
# TYPE authsidecar_mail_failed_attempts_total counter
authsidecar_mail_failed_attempts_total{delivery="smtp",type="email_verification"} 0
authsidecar_mail_failed_attempts_total{delivery="smtp",type="password_reset"} 0
# HELP authsidecar_mail_oldest_pending_age_seconds Age of the oldest undelivered outbox message (0 when none), as of the worker's last poll.
# TYPE authsidecar_mail_oldest_pending_age_seconds gauge
authsidecar_mail_oldest_pending_age_seconds 0
# HELP authsidecar_mail_queued_total Messages written to the outbox, by type (password_reset, email_verification).
# TYPE authsidecar_mail_queued_total counter
authsidecar_mail_queued_total{type="email_verification"} 0
authsidecar_mail_queued_total{type="password_reset"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	// A row created 90s ago that keeps failing: the age follows the clock
	// between polls too.
	q.add(t, mustBox(t, testSecret), sampleMessage(PasswordReset), clock.Now().Add(-90*time.Second))
	run(t, w)
	eventually(t, "the first attempt", func() bool { _, f := q.counts(); return f == 1 })
	eventually(t, "the gauge set", func() bool {
		return counter(t, reg, "authsidecar_mail_oldest_pending_age_seconds") == 90
	})
	clock.Add(30 * time.Second)
	if got := counter(t, reg, "authsidecar_mail_oldest_pending_age_seconds"); got != 120 {
		t.Errorf("age 30s later: got %v, want 120", got)
	}
}

func TestNewWorkerRefuses(t *testing.T) {
	good := func() WorkerOptions {
		return WorkerOptions{Queue: newMemQueue(), Box: mustBox(t, "s"), Sender: &recorder{}, Delivery: "log"}
	}
	tests := []struct {
		name    string
		edit    func(*WorkerOptions)
		wantErr string
	}{
		{"no queue", func(o *WorkerOptions) { o.Queue = nil }, "no queue"},
		{"no box", func(o *WorkerOptions) { o.Box = nil }, "no box"},
		{"no sender", func(o *WorkerOptions) { o.Sender = nil }, "no sender"},
		{"no delivery", func(o *WorkerOptions) { o.Delivery = "" }, "no delivery name"},
		{"backoff max below base", func(o *WorkerOptions) { o.BackoffBase, o.BackoffMax = time.Minute, time.Second }, "below backoff base"},
		{"negative attempts", func(o *WorkerOptions) { o.MaxAttempts = -1 }, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := good()
			tt.edit(&o)
			if _, err := NewWorker(o); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
	reg := prometheus.NewRegistry()
	o := good()
	o.Registerer = reg
	if _, err := NewWorker(o); err != nil {
		t.Fatalf("a good worker: %v", err)
	}
	if _, err := NewWorker(o); err == nil || !strings.Contains(err.Error(), "mail metrics") {
		t.Errorf("a second worker on the same registry: got %v, want a registration error", err)
	}
}

// ackFails is a Queue whose acknowledgements fail: the process "crashes"
// between delivery and acknowledgement.
type ackFails struct{ *memQueue }

func (ackFails) AckOutbox(context.Context, string, string, time.Time) error {
	return errors.New("database is gone")
}

// TestWorkerResendAfterLostAckSameMessageID: a message delivered whose
// acknowledgement was lost is sent again by another replica once the lease
// ends, with the same Message-ID, so the receiving side can tell. This is
// the at-least-once edge the outbox cannot close (nothing can, short of the
// receiver de-duplicating).
func TestWorkerResendAfterLostAckSameMessageID(t *testing.T) {
	srv := mailtest.NewSMTPServer(t, mailtest.SMTPOptions{})
	sender, err := NewSMTP(SMTPOptions{Addr: srv.Addr, TLS: TLSNone, From: "accounts@acme.example", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	q := newMemQueue()
	id := q.add(t, mustBox(t, testSecret), sampleMessage(PasswordReset), clock.Now())
	lease := time.Minute

	first, _, logs := testWorker(t, WorkerOptions{Queue: ackFails{q}, Sender: sender, Now: clock.Now, Owner: "replica-1", Lease: lease})
	stop := run(t, first)
	eventually(t, "the first delivery", func() bool { return len(srv.Messages()) == 1 })
	eventually(t, "the failed ack logged", func() bool { return strings.Contains(logs.String(), "acknowledgement failed") })
	stop()

	second, _, _ := testWorker(t, WorkerOptions{Queue: q, Sender: sender, Now: clock.Now, Owner: "replica-2", Lease: lease})
	run(t, second)
	second.Kick()
	time.Sleep(20 * time.Millisecond)
	if n := len(srv.Messages()); n != 1 {
		t.Fatalf("sent again while replica-1's lease held: %d messages", n)
	}
	clock.Add(lease)
	second.Kick()
	eventually(t, "the row delivered by replica-2", func() bool { return q.row(id).State == StateDelivered })
	msgs := srv.Messages()
	if len(msgs) != 2 {
		t.Fatalf("got %d messages, want 2", len(msgs))
	}
	a, b := parsed(t, msgs[0]).MessageID, parsed(t, msgs[1]).MessageID
	if want := "<" + id + "@acme.example>"; a != want || b != want {
		t.Errorf("Message-IDs %q and %q, want %q on both", a, b, want)
	}
}
