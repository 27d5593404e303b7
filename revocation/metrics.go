package revocation

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts what a syncer (a Poller or a Client) brought into a set,
// and what the process's Feed answered. One value serves the one syncer
// and the one feed of a process.
type Metrics struct {
	received *prometheus.CounterVec
	failures prometheus.Counter
	feed     *prometheus.CounterVec
	// lastSync is when the set was last known current (UnixNano): a poll
	// that succeeded, or a feed answer. It starts at creation, so a
	// process that never synced shows its age growing.
	lastSync atomic.Int64
	now      func() time.Time
}

// NewMetrics registers the revocation metrics with reg: revocations
// received by kind, the set's size (size, called at scrape time: the set
// in force), the sync age, sync failures and the feed's answers by how
// they were made. now is the clock (zero: time.Now).
func NewMetrics(reg prometheus.Registerer, size func() int, now func() time.Time) *Metrics {
	if now == nil {
		now = time.Now
	}
	m := &Metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_revocations_total",
			Help: "Revocations this process has read (from the database or the issuer's feed), by kind: session (one session's JWTs), user (a user's JWTs up to a cutoff), all (every JWT up to a cutoff).",
		}, []string{"kind"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "authsidecar_revocation_sync_failures_total",
			Help: "Failed reads of new revocations (a poll of the database, or a request to the issuer's feed).",
		}),
		feed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_revocation_feed_answers_total",
			Help: "Answers of this process's revocation feed (GET /api/auth/revocations) by how they were made: built (built and signed for the request), shared (kept from this second, or built once for several askers of the same cursor), refused (503 FEED_BUSY: the budget of page builds a second was spent).",
		}, []string{"result"}),
		now: now,
	}
	m.lastSync.Store(now().UnixNano())
	for _, k := range Kinds() {
		m.received.WithLabelValues(k.String())
	}
	for _, r := range []string{answerBuilt, answerShared, answerRefused} {
		m.feed.WithLabelValues(r)
	}
	reg.MustRegister(m.received, m.failures, m.feed,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "authsidecar_revocation_set_size",
			Help: "Revocations held in memory (each about 13 bytes).",
		}, func() float64 { return float64(size()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "authsidecar_revocation_sync_age_seconds",
			Help: "Seconds since the revocations held were last known current: the last successful poll (full mode) or feed answer (verifier mode). A healthy process stays under its poll interval or the feed's long-poll wait.",
		}, func() float64 { return m.Age().Seconds() }),
	)
	return m
}

// Age is how long ago the set was last known current.
func (m *Metrics) Age() time.Duration {
	if m == nil {
		return 0
	}
	return m.now().Sub(time.Unix(0, m.lastSync.Load()))
}

func (m *Metrics) synced(at time.Time) {
	if m != nil {
		m.lastSync.Store(at.UnixNano())
	}
}

func (m *Metrics) failed() {
	if m != nil {
		m.failures.Inc()
	}
}

func (m *Metrics) receivedEntries(es []Entry) {
	if m == nil {
		return
	}
	for _, e := range es {
		m.received.WithLabelValues(e.Kind.String()).Inc()
	}
}

// fed counts a feed answer that ended with err, made as result
// (answerBuilt, answerShared) when err is nil: refused when the budget
// was spent, not at all for another failure (logged where it happens).
func (m *Metrics) fed(err error, result string) {
	var busy *busyError
	switch {
	case m == nil:
	case err == nil:
		m.feed.WithLabelValues(result).Inc()
	case errors.As(err, &busy):
		m.feed.WithLabelValues(answerRefused).Inc()
	}
}
