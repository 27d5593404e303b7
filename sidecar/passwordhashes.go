package sidecar

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/authsidecar/authsidecar/passhash"
	"github.com/prometheus/client_golang/prometheus"
)

// passwordHashes is authsidecar_password_hashes: how many users have a
// password hash of each format, the progress of a migration from another
// system (each foreign hash becomes the sidecar's own at its user's first
// sign-in). Counted by one GROUP BY over the credentials, never per
// request: once when the sidecar starts, then at a scrape when the count
// is older than every (a minute), within timeout. So however often
// Prometheus scrapes, a process asks the database at most once a minute,
// nothing runs when nobody scrapes, and no goroutine needs stopping; a
// slow database delays the scrape, at most by timeout, and never a
// request. A count that fails keeps the last one (and waits its minute).
type passwordHashes struct {
	count   func(context.Context) (map[string]int64, error)
	every   time.Duration
	timeout time.Duration
	now     func() time.Time
	log     *slog.Logger
	desc    *prometheus.Desc

	mu     sync.Mutex // one count at a time; a scrape meanwhile waits for it
	at     time.Time  // when the last count was tried
	counts map[string]int64
}

// Counting is bounded: at most once a minute, at most 5 s.
const (
	passwordHashesEvery   = time.Minute
	passwordHashesTimeout = 5 * time.Second
)

// passwordFormats are the label values: every format passhash reads, and
// "other" for the values none of them is.
func passwordFormats() []string {
	var fs []string
	for _, f := range passhash.Formats() {
		fs = append(fs, string(f))
	}
	return append(fs, "other")
}

// registerPasswordHashes counts once and registers the gauge.
func registerPasswordHashes(reg prometheus.Registerer, count func(context.Context) (map[string]int64, error), log *slog.Logger) {
	p := newPasswordHashes(count, log)
	p.countNow()
	reg.MustRegister(p)
}

func newPasswordHashes(count func(context.Context) (map[string]int64, error), log *slog.Logger) *passwordHashes {
	return &passwordHashes{
		count: count, every: passwordHashesEvery, timeout: passwordHashesTimeout, now: time.Now, log: log,
		desc: prometheus.NewDesc("authsidecar_password_hashes",
			"Users by the format of their password hash: scrypt is the sidecar's own, the others were imported from other systems and become scrypt at the user's first sign-in; other is none passhash reads. Counted at most once a minute, at a scrape.",
			[]string{"format"}, nil),
	}
}

// countNow counts, whenever the last count was.
func (p *passwordHashes) countNow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refresh()
}

func (p *passwordHashes) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

// Collect counts again if the last count is older than p.every, and
// exports every format, at 0 when no user has it, once a count has
// succeeded.
func (p *passwordHashes) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.now().Sub(p.at) >= p.every {
		p.refresh()
	}
	if p.counts == nil {
		return
	}
	for _, f := range passwordFormats() {
		ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, float64(p.counts[f]), f)
	}
}

// refresh counts (p.mu held).
func (p *passwordHashes) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	counts, err := p.count(ctx)
	p.at = p.now()
	if err != nil {
		p.log.Warn("password hash formats not counted: authsidecar_password_hashes keeps its last count", "error", err.Error())
		return
	}
	p.counts = counts
}
