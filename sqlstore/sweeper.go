package sqlstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// SweeperOptions configures NewSweeper. Every field's zero value is
// documented.
type SweeperOptions struct {
	// Interval is the time between two runs (sweep.interval). Zero: 1m.
	// SetInterval changes it while Run runs.
	Interval time.Duration
	// RevocationTTL is how long after its time a revocation can still
	// cover a live token: jwt_ttl plus the leeway, the revocation.Set's
	// TTL. Zero: revocations are never swept.
	RevocationTTL time.Duration
	// Batch is the most rows one delete takes. Zero: 100 on SQLite, whose
	// one writer a batch holds, 500 on PostgreSQL.
	Batch int
	// Registerer receives the metrics. Zero: they are kept but not
	// exported.
	Registerer prometheus.Registerer
	// Logger; zero: slog.Default(). Now; zero: time.Now.
	Logger *slog.Logger
	Now    func() time.Time
}

// Sweeper deletes the rows nothing will ever read again (SweepKinds): at
// each run, everything worthless at the run's start, in batches. Each
// batch is one short statement, and the sweeper then pauses twice as long
// as the batch took, so it holds SQLite's one writer (or a CPU,
// PostgreSQL's row locks and I/O) at most a third of the time and the
// requests queued behind a batch go first. On PostgreSQL one replica at a
// time sweeps (trySweepLock); the others find the lock taken and skip
// their run. Rows are judged on this process's clock: replicas must agree
// to within the time a request takes, as revocations need (NTP does).
type Sweeper struct {
	db       *DB
	o        SweeperOptions
	interval atomic.Int64 // ns
	reset    chan struct{}
	m        *sweepMetrics

	mu sync.Mutex // one run at a time
	// gate, when set, is called between two batches (tests hold a run
	// there). Zero: not called.
	gate func(context.Context) error
}

// Run results, the runs metric's label values.
const (
	sweepSwept   = "swept"
	sweepSkipped = "skipped"
	sweepFailed  = "failed"
)

// sweepTimeout bounds one statement of a run: a batch takes milliseconds,
// a count of a million expired rows well under a second.
const sweepTimeout = 30 * time.Second

// NewSweeper returns a sweeper of db; Run drives it. It fails only when
// its metrics cannot be registered.
func NewSweeper(db *DB, o SweeperOptions) (*Sweeper, error) {
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	if o.Batch <= 0 {
		o.Batch = db.dl.sweepBatch
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m, err := newSweepMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Sweeper{db: db, o: o, reset: make(chan struct{}, 1), m: m}
	s.interval.Store(int64(o.Interval))
	return s, nil
}

// SetInterval changes the time between runs (a reload of sweep.interval);
// the next run is d after the call, or after the run under way. The same
// interval again changes nothing.
func (s *Sweeper) SetInterval(d time.Duration) {
	if d <= 0 || s.interval.Swap(int64(d)) == int64(d) {
		return
	}
	select {
	case s.reset <- struct{}{}:
	default:
	}
}

// Run sweeps every interval, the first time one interval after it is
// called, until ctx ends; a run under way stops between two batches. A
// failed run is logged and the next one retries.
func (s *Sweeper) Run(ctx context.Context) {
	for {
		t := time.NewTimer(time.Duration(s.interval.Load()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.reset:
			t.Stop()
			continue
		case <-t.C:
		}
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.o.Logger.Warn("sweep failed; the next run retries", "error", err.Error())
		}
	}
}

// SweepResult is what one run did.
type SweepResult struct {
	// Skipped: another replica holds the sweep lock (it is sweeping).
	Skipped bool
	// Removed is the rows deleted; Pending the rows worthless at the
	// run's start that are still there (a run that failed or was stopped
	// midway, or rows a request held), by kind.
	Removed, Pending map[SweepKind]int64
}

// Sweep runs once: it deletes every row worthless at this instant, kind
// by kind, and returns what it did. It returns early, with what it did so
// far, when ctx ends or a query fails.
func (s *Sweeper) Sweep(ctx context.Context) (SweepResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Now()
	res := SweepResult{Removed: map[SweepKind]int64{}, Pending: map[SweepKind]int64{}}
	lctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	unlock, ok, err := s.db.trySweepLock(lctx)
	cancel()
	if err != nil {
		s.m.runs.WithLabelValues(sweepFailed).Inc()
		return res, err
	}
	if !ok {
		// The replica sweeping reports the backlog; a stale figure here
		// would outlive it.
		for _, k := range SweepKinds() {
			s.m.pending.WithLabelValues(string(k)).Set(0)
		}
		s.m.runs.WithLabelValues(sweepSkipped).Inc()
		res.Skipped = true
		return res, nil
	}
	defer unlock()
	start := time.Now()
	for _, k := range s.kinds() {
		if err = s.sweepKind(ctx, k, s.cutoff(k, now), &res); err != nil {
			break
		}
	}
	s.logRun(res, time.Since(start))
	switch {
	case err != nil && ctx.Err() != nil:
		// Stopped (shutdown), not failed: the next run goes on.
		return res, err
	case err != nil:
		s.m.runs.WithLabelValues(sweepFailed).Inc()
		return res, err
	}
	s.m.runs.WithLabelValues(sweepSwept).Inc()
	return res, nil
}

// kinds are the kinds this sweeper deletes: all but revocations when it
// was given no RevocationTTL.
func (s *Sweeper) kinds() []SweepKind {
	var ks []SweepKind
	for _, k := range SweepKinds() {
		if k != SweepRevocations || s.o.RevocationTTL > 0 {
			ks = append(ks, k)
		}
	}
	return ks
}

// cutoff is the instant at which a row of kind is judged: now for what
// expires, earlier for what is worthless some time after its time.
func (s *Sweeper) cutoff(k SweepKind, now time.Time) time.Time {
	switch k {
	case SweepRateLimits:
		return now.Add(-bucketTTL)
	case SweepRevocations:
		return now.Add(-s.o.RevocationTTL)
	}
	return now
}

// sweepKind counts the rows of k worthless at cutoff, then deletes them
// in batches, pausing after each twice as long as it took.
func (s *Sweeper) sweepKind(ctx context.Context, k SweepKind, cutoff time.Time, res *SweepResult) error {
	qctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	expired, err := s.db.countExpired(qctx, k, cutoff)
	cancel()
	if err != nil {
		return err
	}
	pending := s.m.pending.WithLabelValues(string(k))
	pending.Set(float64(expired))
	res.Pending[k] = expired
	for expired > 0 {
		began := time.Now()
		// A batch once begun runs to its end (milliseconds): stopped
		// midway, whether its rows went would be unknown (SQLite reports
		// an interrupt after a delete that committed). ctx ends the run
		// between batches.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sweepTimeout)
		n, err := s.db.sweepBatch(qctx, k, cutoff, s.o.Batch)
		cancel()
		if err != nil {
			return err
		}
		took := time.Since(began)
		res.Removed[k] += n
		res.Pending[k] = max(0, expired-res.Removed[k])
		s.m.removed.WithLabelValues(string(k)).Add(float64(n))
		pending.Set(float64(res.Pending[k]))
		if n < int64(s.o.Batch) {
			return nil
		}
		if err := pause(ctx, 2*took); err != nil {
			return err
		}
		if s.gate != nil {
			if err := s.gate(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// logRun writes one line for a run that removed something: the rows
// removed by kind, and those left when any are (a run stopped midway). A
// failure is the caller's to log.
func (s *Sweeper) logRun(res SweepResult, took time.Duration) {
	var removed, left []any
	for _, k := range SweepKinds() {
		if n := res.Removed[k]; n > 0 {
			removed = append(removed, slog.Int64(string(k), n))
		}
		if n := res.Pending[k]; n > 0 {
			left = append(left, slog.Int64(string(k), n))
		}
	}
	if len(removed) == 0 {
		return
	}
	attrs := []any{slog.Group("removed", removed...), "took", took.Round(time.Millisecond).String()}
	if len(left) > 0 {
		attrs = append(attrs, slog.Group("pending", left...))
	}
	s.o.Logger.Info("expired rows swept", attrs...)
}

// sweepMetrics are the Sweeper's. kind is a SweepKind, result one of the
// run results: both bounded.
type sweepMetrics struct {
	removed *prometheus.CounterVec
	pending *prometheus.GaugeVec
	runs    *prometheus.CounterVec
}

func newSweepMetrics(reg prometheus.Registerer) (*sweepMetrics, error) {
	m := &sweepMetrics{
		removed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_sweep_removed_total", Help: "Worthless rows the sweeper deleted, by kind (session, recovery_token, oauth_state, rate_limit, revocation).",
		}, []string{"kind"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "authsidecar_sweep_pending_rows", Help: "Rows worthless at the start of this process's last sweep run not deleted yet, by kind: the backlog while a run works through it; 0 once done; reset when the last run found another replica sweeping.",
		}, []string{"kind"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_sweep_runs_total", Help: "Sweeper runs by result (swept; skipped: another replica holds the sweep lock; failed: a query failed, the next run retries).",
		}, []string{"result"}),
	}
	// Every series at 0 from the start, so a rate or an alert matches a
	// series on a fresh process.
	for _, k := range SweepKinds() {
		m.removed.WithLabelValues(string(k))
		m.pending.WithLabelValues(string(k))
	}
	for _, r := range []string{sweepSwept, sweepSkipped, sweepFailed} {
		m.runs.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.removed, m.pending, m.runs} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("sweep metrics: %w", err)
		}
	}
	return m, nil
}
