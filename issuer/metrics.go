package issuer

import "github.com/prometheus/client_golang/prometheus"

// metrics counts what the issuer did. They exist even when not registered,
// so the handlers never check for nil.
type metrics struct {
	signins *prometheus.CounterVec
	signups *prometheus.CounterVec
	jwts    prometheus.Counter
	// recovery counts the account-recovery endpoints by endpoint and result.
	recovery *prometheus.CounterVec
	// social counts sign-ins with identity providers by provider and
	// result (callback.go's constants).
	social *prometheus.CounterVec
	// unlinked counts provider accounts removed because an address was
	// proven after they were linked (Proof), by the proof's cause.
	unlinked *prometheus.CounterVec
	// legacy counts lazy migrations by result (legacysignin.go); its
	// series exist once lazy migration is on.
	legacy *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		signins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_signins_total", Help: "Sign-in attempts by result (ok, invalid_credentials, rejected, rate_limited: the per-IP limit, locked_out: the per-email limit, which refuses the right password too, busy, error).",
		}, []string{"result"}),
		signups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_signups_total", Help: "Sign-up attempts by result (ok, exists, rejected, rate_limited, busy, error).",
		}, []string{"result"}),
		jwts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "authsidecar_jwts_issued_total", Help: "JWTs issued (get-session and token).",
		}),
		recovery: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_recovery_requests_total",
			Help: "Account-recovery requests by endpoint (request-password-reset, reset-password, send-verification-email, verify-email) and result (ok, invalid_token, rejected, rate_limited, busy, error).",
		}, []string{"endpoint", "result"}),
		social: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_social_signins_total",
			Help: "Sign-ins (and links) with identity providers, callback or id token, by provider and result (success, state_invalid, denied, invalid, refused, provider_unavailable, error).",
		}, []string{"provider", "result"}),
		unlinked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_provider_accounts_unlinked_total",
			Help: "Identity-provider accounts removed because the user's address was proven after they were linked (a first verification, a reset or a change of address: whoever linked them held an unproven address), by cause (password_reset, email_verification).",
		}, []string{"cause"}),
		legacy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_legacy_signins_total",
			Help: "Sign-ins for an address the sidecar did not know, answered by the legacy application (lazy migration), by result (migrated, refused: 401 or 404, unavailable: no answer, a 5xx or another status, invalid: a 200 that is not a valid user, conflict: its id is another address's user here, raced: another request created the user first).",
		}, []string{"result"}),
	}
	for _, c := range []string{"password_reset", "email_verification"} {
		m.unlinked.WithLabelValues(c)
	}
	for _, e := range []string{"request-password-reset", "reset-password", "send-verification-email", "verify-email"} {
		for _, r := range []string{"ok", "invalid_token", "rejected", "rate_limited", "busy", "error"} {
			m.recovery.WithLabelValues(e, r)
		}
	}
	// Every result at 0 from the start, so alerts on their rates
	// (deploy/prometheus/rules.yml) match a series on a fresh process and
	// count its first event.
	for _, r := range []string{"ok", "invalid_credentials", "rejected", "rate_limited", "locked_out", "busy", "error"} {
		m.signins.WithLabelValues(r)
	}
	for _, r := range []string{"ok", "exists", "rejected", "rate_limited", "busy", "error"} {
		m.signups.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.signins, m.signups, m.jwts, m.recovery, m.social, m.unlinked, m.legacy)
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

// recoveryResult names the outcome of a recovery request. A redirect with
// error=INVALID_TOKEN is answered without an apiError, so it counts as ok
// here; the 4xx answers are counted by code.
func recoveryResult(e *apiError) string {
	switch {
	case e == nil:
		return "ok"
	case e.code == "INVALID_TOKEN":
		return "invalid_token"
	case e == errRateLimited:
		return "rate_limited"
	case e == errBusy || e == errIntakeFull:
		return "busy"
	case e.status >= 500:
		return "error"
	}
	return "rejected"
}

// precreateSocial makes every result of a provider exist at 0, so an
// alert on a rate counts a provider's first failure.
func (m *metrics) precreateSocial(provider string) {
	for _, r := range []string{socialSuccess, socialState, socialDenied, socialInvalid, socialRefused, socialUnavailable, socialError} {
		m.social.WithLabelValues(provider, r)
	}
}
