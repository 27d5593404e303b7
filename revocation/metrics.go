package revocation

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts what a syncer (a Poller or a Client) brought into a set.
// One value serves the one syncer of a process.
type Metrics struct {
	received *prometheus.CounterVec
	failures prometheus.Counter
	// lastSync is when the set was last known current (UnixNano): a poll
	// that succeeded, or a feed answer. It starts at creation, so a
	// process that never synced shows its age growing.
	lastSync atomic.Int64
	now      func() time.Time
}

// NewMetrics registers the revocation metrics with reg: revocations
// received by kind, the set's size (size, called at scrape time: the set
// in force), the sync age and sync failures. now is the clock (zero:
// time.Now).
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
		now: now,
	}
	m.lastSync.Store(now().UnixNano())
	for _, k := range Kinds() {
		m.received.WithLabelValues(k.String())
	}
	reg.MustRegister(m.received, m.failures,
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
