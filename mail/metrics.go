package mail

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the outbox's. Labels are bounded: type is a Kind, delivery
// the one configured delivery name.
type metrics struct {
	queued    *prometheus.CounterVec
	delivered *prometheus.CounterVec
	failed    *prometheus.CounterVec
	dead      *prometheus.CounterVec
	// oldest is the created_at (unix nanoseconds) of the oldest pending
	// row at the last poll, 0 when there was none. The gauge is computed
	// at scrape time from it, so the age keeps growing while the worker
	// is stuck (a hung send, a store that does not answer) instead of
	// freezing at its last value.
	oldest atomic.Int64
}

func newMetrics(reg prometheus.Registerer, delivery string, now func() time.Time) (*metrics, error) {
	m := &metrics{
		queued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_mail_queued_total", Help: "Messages written to the outbox, by type (password_reset, email_verification).",
		}, []string{"type"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_mail_delivered_total", Help: "Messages the receiving end accepted (SMTP server, webhook 2xx, log), by type and delivery.",
		}, []string{"type", "delivery"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_mail_failed_attempts_total", Help: "Delivery attempts that failed and were rescheduled or given up, by type and delivery.",
		}, []string{"type", "delivery"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_mail_dead_total", Help: "Messages given up (email.max_attempts reached, link expired before delivery, or payload unreadable), by type and delivery.",
		}, []string{"type", "delivery"}),
	}
	// Every series at 0 from the start, so an alert on a rate matches a
	// series on a fresh process and counts its first event.
	for _, k := range Kinds() {
		m.queued.WithLabelValues(string(k))
		m.delivered.WithLabelValues(string(k), delivery)
		m.failed.WithLabelValues(string(k), delivery)
		m.dead.WithLabelValues(string(k), delivery)
	}
	if reg == nil {
		return m, nil
	}
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "authsidecar_mail_oldest_pending_age_seconds", Help: "Age of the oldest undelivered outbox message (0 when none), as of the worker's last poll.",
	}, func() float64 {
		t := m.oldest.Load()
		if t == 0 {
			return 0
		}
		return max(0, now().Sub(time.Unix(0, t)).Seconds())
	})
	for _, c := range []prometheus.Collector{m.queued, m.delivered, m.failed, m.dead, age} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("mail metrics: %w", err)
		}
	}
	return m, nil
}

// typeLabel bounds the type label: a row of an unknown kind (a store
// defect) is counted as "unknown" rather than minting a series per value.
func typeLabel(k Kind) string {
	if k.Valid() {
		return string(k)
	}
	return "unknown"
}
