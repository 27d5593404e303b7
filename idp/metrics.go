package idp

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the identity providers' request and refresh metrics. One
// value serves every Set a process builds (config reloads included), so
// it is registered once.
type Metrics struct {
	duration  *prometheus.HistogramVec
	failures  *prometheus.CounterVec
	refreshes *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg; a nil reg registers nothing
// (tests, tools).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "authsidecar_idp_request_duration_seconds",
			Help:    "Time of requests to identity providers, by provider and endpoint (discovery, jwks, token, userinfo, user, emails, orgs), body included.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"provider", "endpoint"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_idp_request_failures_total",
			Help: "Requests to identity providers that failed: no answer in time, a 5xx, or a body too large or cut off.",
		}, []string{"provider", "endpoint"}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_idp_refreshes_total",
			Help: "Reads of identity providers' discovery documents and JWKS, by provider, document (discovery, jwks) and result (ok, error, skipped_cooldown).",
		}, []string{"provider", "document", "result"}),
	}
	if reg != nil {
		reg.MustRegister(m.duration, m.failures, m.refreshes)
	}
	return m
}

// precreate makes a provider's refresh series exist at 0, so a rule on
// their increase sees the first failure.
func (m *Metrics) precreate(provider string, documents ...string) {
	for _, d := range documents {
		for _, r := range []string{"ok", "error"} {
			m.refreshes.WithLabelValues(provider, d, r)
		}
	}
}

func (m *Metrics) observe(provider, endpoint string, d time.Duration, ok bool) {
	m.duration.WithLabelValues(provider, endpoint).Observe(d.Seconds())
	if !ok {
		m.failures.WithLabelValues(provider, endpoint).Inc()
	}
}

func (m *Metrics) refreshed(provider, document, result string) {
	m.refreshes.WithLabelValues(provider, document, result).Inc()
}
