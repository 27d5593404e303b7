package sidecar

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authsidecar/authsidecar/config"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// reloadMetrics say whether the config in force is the file's.
type reloadMetrics struct {
	reloads     *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	info        *prometheus.GaugeVec
}

func newReloadMetrics(reg prometheus.Registerer) *reloadMetrics {
	m := &reloadMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsidecar_config_reloads_total", Help: "Config reloads (SIGHUP or POST /-/reload) by result (success, failure: the file was invalid, changed a key that needs a restart, or named a JWKS URL that gave no usable key; the previous config stays in force).",
		}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "authsidecar_config_last_reload_success_timestamp_seconds", Help: "Unix time the config in force was loaded (start-up or the last successful reload).",
		}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "authsidecar_config_info", Help: "1, labelled with the first 12 hex digits of the SHA-256 of the config file in force.",
		}, []string{"hash"}),
	}
	// Both results at 0 from the start, so an alert on an increase of
	// failures counts the first one.
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	reg.MustRegister(m.reloads, m.lastSuccess, m.info)
	return m
}

// loaded records that the config with hash is in force since now. An
// empty hash (no file: the demo) exports no info series.
func (m *reloadMetrics) loaded(hash string, now time.Time) {
	m.lastSuccess.Set(float64(now.UnixNano()) / 1e9)
	m.info.Reset()
	if hash != "" {
		m.info.WithLabelValues(hash).Set(1)
	}
}

// FileHash names a config file's content in the info metric and the logs.
func FileHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// reloader re-reads the config file and applies it, all or nothing.
type reloader struct {
	path    string
	st      *stack
	log     *slog.Logger
	metrics *reloadMetrics
	// reloading and ready tell systemd (Type=notify-reload) a reload
	// began and ended. Zero: not called.
	reloading, ready func()
	// sweep takes sweep.interval; nil in verifier mode.
	sweep *sqlstore.Sweeper

	mu   sync.Mutex // one reload at a time
	cfg  config.Config
	hash string
}

// errRestartNeeded: the file changes keys a reload cannot apply.
var errRestartNeeded = errors.New("changed keys need a restart")

// reload re-reads the file. On any error the running config stays in
// force, whole: an invalid file, a changed restart key or a failed build
// changes nothing.
func (r *reloader) reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reloading != nil {
		r.reloading()
	}
	if r.ready != nil {
		// Successful or not, the service is running and serving.
		defer r.ready()
	}
	hash, err := r.try()
	if err != nil {
		r.metrics.reloads.WithLabelValues("failure").Inc()
		r.log.Error("config reload refused; the running config stays in force", "config", r.path, "hash", r.hash, "error", err.Error())
		return err
	}
	r.metrics.reloads.WithLabelValues("success").Inc()
	r.metrics.loaded(hash, time.Now())
	r.log.Info("config reloaded", "config", r.path, "hash", hash, "previous_hash", r.hash)
	r.hash = hash
	return nil
}

func (r *reloader) try() (string, error) {
	data, err := os.ReadFile(r.path)
	if err != nil {
		return "", fmt.Errorf("config: %w", err)
	}
	// Parse reports every problem as "file:line: path: message", as at
	// start-up.
	next, err := config.Parse(r.path, data)
	if err != nil {
		return "", err
	}
	if keys := config.RestartKeys(r.cfg, next); len(keys) > 0 {
		return "", fmt.Errorf("%w: %s", errRestartNeeded, strings.Join(keys, ", "))
	}
	if err := r.st.apply(next); err != nil {
		return "", fmt.Errorf("apply: %w", err)
	}
	if r.sweep != nil {
		r.sweep.SetInterval(next.Sweep.Interval.D())
	}
	r.cfg = next
	return FileHash(data), nil
}

// ServeHTTP is POST /-/reload on the admin listener, as Prometheus has:
// 200 once the file is in force, 500 with the reason when it was refused.
func (r *reloader) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if err := r.reload(); err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		json.NewEncoder(w).Encode(map[string]string{"code": "RELOAD_REFUSED", "message": err.Error()})
		return
	}
	r.mu.Lock()
	hash := r.hash
	r.mu.Unlock()
	json.NewEncoder(w).Encode(map[string]string{"status": "success", "hash": hash})
}
