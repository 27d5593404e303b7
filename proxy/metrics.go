package proxy

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the request-path metrics. Labels are bounded: route classes,
// status codes and fixed reason words, never paths or user ids.
type Metrics struct {
	// byClass caches the per-class children so the hot path does not hash
	// label values: durations by class, and request counters by class and
	// status code (filled on first use).
	durationByClass [len(classNames)]prometheus.Observer
	requestsByCode  [len(classNames)]sync.Map // int status -> prometheus.Counter

	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	failures       *prometheus.CounterVec
	upstreamErrors *prometheus.CounterVec
	// inflight is read at scrape time: an atomic add per request, where a
	// prometheus.Gauge does a compare-and-swap loop on a float that both
	// CPUs contend for.
	inflight    atomic.Int64
	refreshes   *prometheus.CounterVec
	wsClosed    *prometheus.CounterVec
	slowClients *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_requests_total", Help: "Requests by route class and status code.",
		}, []string{"class", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "authsidecar_request_duration_seconds", Help: "Request duration by route class, to the end of the response.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"class"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_auth_failures_total", Help: "Refused requests by route class and reason.",
		}, []string{"class", "reason"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_upstream_errors_total", Help: "Failed upstream round trips by kind (unreachable, timeout, canceled, busy: every connection in use and the queue for one full, client_share: the client already had its share of the connections).",
		}, []string{"kind"}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_keyset_refreshes_total", Help: "Key set refreshes by trigger (boot, max_age, unknown_kid, issuer, retry) and result (ok, error, skipped_cooldown).",
		}, []string{"trigger", "result"}),
		wsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_websocket_closed_total", Help: "WebSocket tunnels the sidecar closed itself, by reason (token_expired: the token that opened it reached exp + auth.leeway; token_revoked: it was revoked; not_websocket: a peer sent bytes that are not WebSocket frames).",
		}, []string{"reason"}),
		slowClients: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_slow_clients_total", Help: "Requests the sidecar ended because the client was below proxy.body_min_rate, by reason (slow_body: it sent the request body too slowly, answered 408; slow_read: it took the answer too slowly, the connection was closed).",
		}, []string{"reason"}),
	}
	// Present at 0 from the start, so an alert on its rate needs no
	// special case for "never happened", and the first event counts in a
	// rate() (a series born at 1 shows no increase). The label values are
	// those the code can produce; deploy/prometheus/rules.yml relies on
	// them (cmd/authsidecar TestRuleSeriesAtStartup).
	m.wsClosed.WithLabelValues(CloseReasonTokenExpired)
	m.wsClosed.WithLabelValues(CloseReasonTokenRevoked)
	m.wsClosed.WithLabelValues(CloseReasonNotWebSocket)
	m.slowClients.WithLabelValues(CloseReasonSlowBody)
	m.slowClients.WithLabelValues(CloseReasonSlowRead)
	for class, reasons := range failureReasons() {
		for _, reason := range reasons {
			m.failures.WithLabelValues(class, reason)
		}
	}
	for _, kind := range []string{upstreamUnreachable, upstreamTimeout, upstreamCanceled, upstreamBusy, upstreamClientShare} {
		m.upstreamErrors.WithLabelValues(kind)
	}
	for _, tr := range refreshResults {
		m.refreshes.WithLabelValues(tr[0], tr[1])
	}
	reg.MustRegister(m.requests, m.duration, m.failures, m.upstreamErrors, m.refreshes, m.wsClosed, m.slowClients,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "authsidecar_inflight_requests", Help: "Requests being served now.",
		}, func() float64 { return float64(m.inflight.Load()) }))
	for c := range classNames {
		m.durationByClass[c] = m.duration.WithLabelValues(classNames[c])
		// The statuses the sidecar writes itself when it fails (500 a
		// recovered panic, 502 upstream unreachable, 503 unavailable or
		// keys unavailable, 504 upstream timeout), so the 5xx ratio's
		// series exist before the first failure.
		for _, code := range ownServerErrors {
			m.requestsByCode[c].Store(code, m.requests.WithLabelValues(classNames[c], strconv.Itoa(code)))
		}
	}
	return m
}

// ownServerErrors are the 5xx statuses the sidecar itself answers with.
var ownServerErrors = []int{500, 502, 503, 504}

// tokenReasons are the refusals of a request that must carry a JWT.
var tokenReasons = []string{ReasonMissing, ReasonMalformed, ReasonBadSignature, ReasonExpired, ReasonNotYetValid,
	ReasonUnknownKID, ReasonWrongIssuer, ReasonWrongAudience, ReasonBadClaims, ReasonUnavailable, ReasonKeysUnavailable,
	ReasonRevoked, ReasonRevocationsUnavailable}

// failureReasons lists, per class, the reasons ServeHTTP can refuse with:
// a bad Host or path before classification, an Upgrade header where no
// tunnel is allowed (or malformed) on any classified route, and the
// checks of each class.
func failureReasons() map[string][]string {
	m := map[string][]string{ClassRejected.String(): {ReasonBadHost, ReasonBadPath}}
	for c := range classNames {
		if Class(c) != ClassRejected {
			m[classNames[c]] = []string{ReasonBadUpgrade}
		}
	}
	add := func(c Class, reasons ...string) { m[c.String()] = append(m[c.String()], reasons...) }
	add(ClassCookieOnly, ReasonNoSession, ReasonUnavailable)
	add(ClassAdmin, tokenReasons...)
	add(ClassAdmin, ReasonForbiddenRole)
	add(ClassBusiness, tokenReasons...)
	add(ClassWebSocket, tokenReasons...)
	return m
}

// refreshResults are the (trigger, result) pairs the key cache reports.
var refreshResults = [][2]string{
	{TriggerBoot, "ok"}, {TriggerBoot, "error"},
	{TriggerMaxAge, "ok"}, {TriggerMaxAge, "error"},
	{TriggerUnknownKID, "ok"}, {TriggerUnknownKID, "error"}, {TriggerUnknownKID, "skipped_cooldown"},
	{TriggerIssuer, "ok"},
	{TriggerRetry, "ok"}, {TriggerRetry, "error"},
}

// observeRequest counts one finished request.
func (m *Metrics) observeRequest(class Class, status int, seconds float64) {
	if int(class) >= len(classNames) {
		return
	}
	m.durationByClass[class].Observe(seconds)
	codes := &m.requestsByCode[class]
	c, ok := codes.Load(status)
	if !ok {
		c, _ = codes.LoadOrStore(status, m.requests.WithLabelValues(classNames[class], strconv.Itoa(status)))
	}
	c.(prometheus.Counter).Inc()
}

// ObserveRefresh counts a key set refresh; pass it as KeyCacheOptions.OnRefresh.
func (m *Metrics) ObserveRefresh(trigger, result string) {
	m.refreshes.WithLabelValues(trigger, result).Inc()
}

// RegisterKeyCache exports the key set's age, size and usability, read at
// scrape time from the cache current returns: the one in force, which a
// config reload that changes the key source replaces.
func RegisterKeyCache(reg prometheus.Registerer, current func() *KeyCache) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "authsidecar_keyset_usable", Help: "1 when the key set may verify tokens; 0 when it was never loaded or reads have failed past stale_if_error (requests then get 503 KEYS_UNAVAILABLE).",
		}, func() float64 {
			if current().Usable() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "authsidecar_keyset_age_seconds", Help: "Seconds since the key set was last read from the store.",
		}, func() float64 { return current().Age().Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "authsidecar_keys_loaded", Help: "Public keys held in memory for verification.",
		}, func() float64 { return float64(current().Len()) }),
	)
}

func (m *Metrics) tunnelClosed(reason string) {
	if m != nil {
		m.wsClosed.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) upstreamError(kind string) {
	if m != nil {
		m.upstreamErrors.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) slowClient(reason string) {
	if m != nil {
		m.slowClients.WithLabelValues(reason).Inc()
	}
}
