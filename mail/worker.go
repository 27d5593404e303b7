package mail

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	randv2 "math/rand/v2"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// WorkerOptions configure a Worker.
type WorkerOptions struct {
	// Queue is the outbox. Required.
	Queue Queue
	// Box opens the payloads. Required.
	Box *Box
	// Sender delivers. Required.
	Sender Sender
	// Delivery names the sender in metric labels ("smtp", "webhook",
	// "log"). Required.
	Delivery string
	// Owner identifies this process in leases; it must differ between
	// replicas. "" means hostname:pid:random.
	Owner string
	// Batch is how many rows one claim takes; 0 means 10.
	Batch int
	// Lease is how long a claim holds its rows unless renewed; 0 means
	// 10s. While it delivers a batch the worker renews the lease every
	// Lease/3, so a live worker keeps its rows however long its sends
	// take, and the rows of a process killed mid-batch (kill -9) are free
	// to every other process, and to it restarted, one Lease after its
	// last renewal.
	Lease time.Duration
	// SendTimeout bounds one send; 0 means 30s. A send is only started
	// while the lease is held: once renewals have failed for a whole
	// lease, the rest of the batch is given back instead.
	SendTimeout time.Duration
	// PollInterval is how often the outbox is looked at when nothing
	// calls Kick; 0 means 5s. It bounds the delay of retries and of rows
	// queued by other replicas.
	PollInterval time.Duration
	// MaxAttempts is how many attempts a message gets before it is dead;
	// 0 means 10. A claim is an attempt, so a message whose every try
	// kills the process delivering it is dead, unsent, at its next claim
	// after MaxAttempts.
	MaxAttempts int
	// BackoffBase is the delay after the first failure, doubled after
	// each further one up to BackoffMax, with equal jitter (a delay d
	// becomes a random value in [d/2, d]); 0 means 15s.
	BackoffBase time.Duration
	// BackoffMax caps the delay between attempts; 0 means 30m.
	BackoffMax time.Duration
	// Logger receives the worker's log; nil means none. No line it
	// writes holds a link or a token.
	Logger *slog.Logger
	// Registerer receives the metrics; nil means they are kept but not
	// registered.
	Registerer prometheus.Registerer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Worker delivers the outbox: it claims due rows with a lease, opens and
// sends each, and acknowledges it, or reschedules it with exponential
// backoff, or marks it dead. Run it once per process; any number of
// processes may share one outbox.
type Worker struct {
	q            Queue
	box          *Box
	sender       Sender
	delivery     string
	owner        string
	batch        int
	lease        time.Duration
	sendTimeout  time.Duration
	storeTimeout time.Duration
	poll         time.Duration
	maxAttempts  int
	base, max    time.Duration
	log          *slog.Logger
	now          func() time.Time
	m            *metrics
	kick         chan struct{}
}

// lastErrorLimit bounds the error text stored in the outbox row.
const lastErrorLimit = 1000

// storeTimeout bounds one write of an outcome, a release or a renewal.
const storeTimeout = 5 * time.Second

// NewWorker checks o, creates the metrics and registers them.
func NewWorker(o WorkerOptions) (*Worker, error) {
	w := &Worker{
		q: o.Queue, box: o.Box, sender: o.Sender, delivery: o.Delivery, owner: o.Owner,
		batch: o.Batch, lease: o.Lease, sendTimeout: o.SendTimeout, storeTimeout: storeTimeout, poll: o.PollInterval,
		maxAttempts: o.MaxAttempts, base: o.BackoffBase, max: o.BackoffMax,
		log: o.Logger, now: o.Now, kick: make(chan struct{}, 1),
	}
	var errs []error
	if w.q == nil {
		errs = append(errs, errors.New("no queue"))
	}
	if w.box == nil {
		errs = append(errs, errors.New("no box"))
	}
	if w.sender == nil {
		errs = append(errs, errors.New("no sender"))
	}
	if w.delivery == "" {
		errs = append(errs, errors.New("no delivery name"))
	}
	setDefault(&w.batch, 10)
	setDefault(&w.lease, 10*time.Second)
	setDefault(&w.sendTimeout, 30*time.Second)
	setDefault(&w.poll, 5*time.Second)
	setDefault(&w.maxAttempts, 10)
	setDefault(&w.base, 15*time.Second)
	setDefault(&w.max, 30*time.Minute)
	if w.batch < 0 || w.lease < 0 || w.sendTimeout < 0 || w.poll < 0 || w.maxAttempts < 0 || w.base < 0 || w.max < 0 {
		errs = append(errs, errors.New("negative batch, duration or attempts"))
	}
	if w.max < w.base {
		errs = append(errs, fmt.Errorf("backoff max %v is below backoff base %v", w.max, w.base))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("mail worker: %w", err)
	}
	if w.owner == "" {
		w.owner = newOwner()
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.now == nil {
		w.now = time.Now
	}
	m, err := newMetrics(o.Registerer, w.delivery, w.now)
	if err != nil {
		return nil, err
	}
	w.m = m
	return w, nil
}

func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// newOwner is hostname:pid:random, unique per process even when two
// containers share a hostname and a pid.
func newOwner() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), strings.ToLower(rand.Text()[:8]))
}

// Owner is the lease owner this worker claims rows as.
func (w *Worker) Owner() string { return w.owner }

// Kick wakes the worker now instead of at its next poll. It never blocks;
// kicks while the worker is busy coalesce into one more poll.
func (w *Worker) Kick() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Queued counts a message the caller has committed to the outbox
// (authsidecar_mail_queued_total) and kicks the worker. The issuer calls
// it after its transaction commits, so delivery does not wait for a poll.
func (w *Worker) Queued(k Kind) {
	w.m.queued.WithLabelValues(typeLabel(k)).Inc()
	w.Kick()
}

// Run delivers until ctx ends, then returns nil once the send in flight
// (if any) has finished or timed out and its outcome is recorded. Rows
// claimed but not yet sent are given back at once, for the next claim of
// any process.
func (w *Worker) Run(ctx context.Context) error {
	w.log.Info("mail worker started", "owner", w.owner, "delivery", w.delivery)
	// Timers of Go 1.23+: Stop and Reset leave no stale tick behind, so
	// no draining is needed.
	timer := time.NewTimer(w.poll)
	defer timer.Stop()
	for {
		full := w.pollOnce(ctx)
		if ctx.Err() != nil {
			break
		}
		if full {
			continue // a full batch: more rows may be due right now
		}
		timer.Reset(w.poll)
		select {
		case <-ctx.Done():
		case <-w.kick:
		case <-timer.C:
		}
		if ctx.Err() != nil {
			break
		}
	}
	w.log.Info("mail worker stopped", "owner", w.owner)
	return nil
}

// pollOnce claims one batch, delivers it while its lease is held, and
// updates the oldest-pending gauge. It reports whether the claim was full.
func (w *Worker) pollOnce(ctx context.Context) (full bool) {
	defer w.updateOldest(ctx)
	claimed := w.now()
	rows, err := w.q.ClaimOutbox(ctx, w.owner, w.batch, w.lease, claimed)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Error("mail outbox claim failed", "err", err)
		}
		return false
	}
	if len(rows) == 0 {
		return false
	}
	lease := w.holdLease(claimed)
	defer lease.stop()
	for i, q := range rows {
		if ctx.Err() != nil {
			// Stopping: what was claimed and not tried goes back now, not
			// when the lease ends (a restart, or another replica, sends it
			// at once).
			w.release(ctx, rows[i:])
			return false
		}
		// Start a send only while the lease is held: renewals that keep
		// failing (the database unreachable) let it lapse, and then
		// another process may claim these rows.
		if !lease.held(w.now()) {
			w.log.Warn("mail lease not renewed in time; the rest of the batch is given back", "left", len(rows)-i)
			w.release(ctx, rows[i:])
			return false
		}
		w.deliver(ctx, q)
	}
	return len(rows) == w.batch
}

func (w *Worker) updateOldest(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	t, ok, err := w.q.OldestPending(ctx)
	switch {
	case err != nil:
		w.log.Warn("mail outbox oldest pending: query failed", "err", err)
	case !ok:
		w.m.oldest.Store(0)
	default:
		w.m.oldest.Store(t.UnixNano())
	}
}

// deliver handles one claimed row to its end: acknowledged, rescheduled
// or dead. The send and the write-back run detached from ctx (bounded by
// their own timeouts), so a shutdown neither cuts a send in the middle
// nor loses the record of one that happened.
func (w *Worker) deliver(ctx context.Context, q Queued) {
	typ := typeLabel(q.Kind)
	log := w.log.With("id", q.ID, "type", typ)
	if q.Attempts > w.maxAttempts {
		// Every attempt is counted at its claim: this one is past the
		// last, so an earlier attempt ended without an outcome (the
		// process delivering it stopped, maybe because of this message).
		// It is not tried again.
		log.Error("mail out of attempts: an attempt ended without an outcome (the process delivering it stopped); marked dead unsent", "attempts", q.Attempts-1)
		w.finish(ctx, log, q, typ, fmt.Sprintf("%d attempts, the last without an outcome: the process delivering it stopped", q.Attempts-1), true, false)
		return
	}
	m, err := w.box.Open(q.ID, q.Sealed)
	if err == nil && m.Kind != q.Kind {
		err = fmt.Errorf("payload type %q does not match the row's %q", m.Kind, q.Kind)
	}
	if err != nil {
		// Another AUTH_SECRET sealed it (replicas mid-rotation, or one
		// started with the wrong secret) or the row was altered: the two
		// look alike. Retried like a failed send, so a replica that can
		// open it may still deliver it; dead after max attempts. The error
		// names the cause class, never the secret or payload.
		log.Error("mail payload unreadable with this process's AUTH_SECRET (another secret sealed it, or the row was altered)", "err", err, "attempt", q.Attempts)
		w.finish(ctx, log, q, typ, err.Error(), q.Attempts >= w.maxAttempts, true)
		return
	}
	if !m.TokenExpiresAt.IsZero() && !w.now().Before(m.TokenExpiresAt) {
		// A link that no longer works helps nobody; the user asks again.
		log.Warn("mail link expired before delivery: marked dead", "attempts", q.Attempts)
		w.finish(ctx, log, q, typ, "link expired before delivery", true, false)
		return
	}

	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.sendTimeout)
	err = w.sender.Send(sendCtx, m, q.ID)
	cancel()
	if err == nil {
		w.m.delivered.WithLabelValues(typ, w.delivery).Inc()
		storeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.storeTimeout)
		defer cancel()
		switch err := w.q.AckOutbox(storeCtx, q.ID, w.owner, w.now()); {
		case errors.Is(err, ErrLeaseLost):
			log.Warn("mail delivered, but the lease was lost before the acknowledgement: another replica may deliver it again (same Message-ID / webhook-id)")
		case err != nil:
			log.Error("mail delivered, but the acknowledgement failed: it will be delivered again after the lease (same Message-ID / webhook-id)", "err", err)
		default:
			log.Info("mail delivered", "attempt", q.Attempts)
		}
		return
	}
	w.finish(ctx, log, q, typ, redact(err.Error(), m.URL), q.Attempts >= w.maxAttempts, true)
}

// finish records a failed or hopeless row: rescheduled with backoff, or
// dead. sent says whether this was a delivery attempt (counted as
// failed); a row given up without one (unreadable, expired) only counts
// as dead.
func (w *Worker) finish(ctx context.Context, log *slog.Logger, q Queued, typ, lastErr string, dead, sent bool) {
	if sent {
		w.m.failed.WithLabelValues(typ, w.delivery).Inc()
	}
	now := w.now()
	next := now
	if !dead {
		next = now.Add(w.backoff(q.Attempts))
	}
	storeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.storeTimeout)
	defer cancel()
	err := w.q.FailOutbox(storeCtx, q.ID, w.owner, next, truncate(lastErr, lastErrorLimit), dead, now)
	switch {
	case errors.Is(err, ErrLeaseLost):
		log.Warn("mail attempt outcome not recorded: the lease was lost to another replica", "err", lastErr)
		return
	case err != nil:
		log.Error("mail attempt outcome not recorded: it will be retried after the lease", "err", err, "attempt_err", lastErr)
		return
	}
	if dead {
		w.m.dead.WithLabelValues(typ, w.delivery).Inc()
		if sent {
			log.Error("mail delivery failed: marked dead", "attempts", q.Attempts, "err", lastErr)
		}
		return
	}
	log.Warn("mail delivery failed: will retry", "attempt", q.Attempts, "next_attempt_at", next, "err", lastErr)
}

// backoff is the delay after the attempt-th failure: BackoffBase doubled
// per earlier failure, capped at BackoffMax, then equal jitter: a random
// value in [d/2, d]. Equal rather than full jitter keeps a floor, so a
// receiver that is down is not hit again at once by a retry drawn near 0,
// while replicas' retries still spread out.
func (w *Worker) backoff(attempt int) time.Duration {
	d := w.base
	for i := 1; i < attempt && d < w.max; i++ {
		d *= 2
	}
	d = min(d, w.max)
	half := d / 2
	return half + randv2.N(d-half+1)
}

// redact removes the link from an error text before it is logged or
// stored: a receiver or a library might quote it.
func redact(s, url string) string {
	if url == "" {
		return s
	}
	return strings.ReplaceAll(s, url, "[link]")
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
