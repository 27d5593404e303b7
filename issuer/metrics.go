package issuer

import "github.com/prometheus/client_golang/prometheus"

// metrics counts what the issuer did. They exist even when not registered,
// so the handlers never check for nil.
type metrics struct {
	signins *prometheus.CounterVec
	signups *prometheus.CounterVec
	jwts    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		signins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_signins_total", Help: "Sign-in attempts by result (ok, invalid_credentials, rejected, rate_limited, busy, error).",
		}, []string{"result"}),
		signups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_signups_total", Help: "Sign-up attempts by result (ok, exists, rejected, rate_limited, busy, error).",
		}, []string{"result"}),
		jwts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "authsidecar_jwts_issued_total", Help: "JWTs issued (get-session and token).",
		}),
	}
	// Every result at 0 from the start, so alerts on their rates
	// (deploy/prometheus/rules.yml) match a series on a fresh process and
	// count its first event.
	for _, r := range []string{"ok", "invalid_credentials", "rejected", "rate_limited", "busy", "error"} {
		m.signins.WithLabelValues(r)
	}
	for _, r := range []string{"ok", "exists", "rejected", "rate_limited", "busy", "error"} {
		m.signups.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.signins, m.signups, m.jwts)
	}
	return m
}

// result names the outcome of a sign-in or sign-up for the metrics.
func result(e *apiError) string {
	switch {
	case e == nil:
		return "ok"
	case e == errInvalidCredentials:
		return "invalid_credentials"
	case e == errUserExists:
		return "exists"
	case e == errBusy:
		return "busy"
	case e.status >= 500:
		return "error"
	}
	return "rejected"
}
