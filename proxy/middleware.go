package proxy

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Middleware wraps a handler. The sidecar's stack is composed in one place
// (cmd/authsidecar) and reads top to bottom: recover → request id →
// log/metrics → proxy.
type Middleware func(http.Handler) http.Handler

// Chain applies middlewares so that the first one listed is outermost.
func Chain(h http.Handler, ms ...Middleware) http.Handler {
	for i := len(ms) - 1; i >= 0; i-- {
		h = ms[i](h)
	}
	return h
}

// Recover turns a panic into a 500 JSON answer and a log line, so one bad
// request never takes the process down. http.ErrAbortHandler is re-raised:
// it is how a handler aborts a response on purpose (ReverseProxy does).
func Recover(log *slog.Logger) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(v)
				}
				log.Error("panic serving request", "panic", v, "path", r.URL.EscapedPath())
				writeError(w, http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "Internal server error")
			}()
			next.ServeHTTP(w, r)
		})
	}
}

const requestIDHeader = "X-Request-Id"

// RequestID keeps a well-formed client X-Request-Id (so traces join up
// across hops) or makes one, and sets it on the request and the response.
func RequestID() Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get(requestIDHeader)
			if !validRequestID(id) {
				var b [12]byte
				rand.Read(b[:])
				id = hex.EncodeToString(b[:])
				r.Header.Set(requestIDHeader, id)
			}
			w.Header().Set(requestIDHeader, id)
			next.ServeHTTP(w, r)
		})
	}
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(isUnreserved(c) || c == ':') {
			return false
		}
	}
	return true
}

// Observe writes one access-log line per request and records the request
// metrics. It reads what the proxy learned (class, user, reason) from the
// RequestInfo it puts in the context. Never a token, cookie or query
// string: the query may carry ?token=.
func Observe(log *slog.Logger, m *Metrics, accessLog bool) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			r, info := WithInfo(r)
			sw := &statusWriter{ResponseWriter: w}
			if m != nil {
				m.inflight.Inc()
				defer m.inflight.Dec()
			}
			next.ServeHTTP(sw, r)
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			elapsed := time.Since(start)
			class := info.Class.String()
			if m != nil {
				m.observeRequest(info.Class, status, elapsed.Seconds())
				if info.Reason != "" {
					m.failures.WithLabelValues(class, info.Reason).Inc()
				}
			}
			if !accessLog {
				return
			}
			path := info.path
			if path == "" {
				path = r.URL.EscapedPath()
			}
			if len(path) > 256 {
				path = path[:256]
			}
			attrs := []slog.Attr{
				slog.String("method", r.Method),
				slog.String("path", path),
				slog.String("class", class),
				slog.Int("status", status),
				slog.Duration("duration", elapsed),
				slog.Int64("bytes", sw.bytes),
				slog.String("request_id", r.Header.Get(requestIDHeader)),
			}
			if info.UserID != "" {
				attrs = append(attrs, slog.String("user_id", info.UserID))
			}
			if info.Reason != "" {
				attrs = append(attrs, slog.String("reason", info.Reason))
			}
			log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
		})
	}
}

// statusWriter records the status and body size. Unwrap lets
// http.ResponseController reach Flush and friends (SSE); Hijack is
// explicit so WebSocket upgrades get the status recorded as 101.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 || w.status < 200 { // 1xx may precede the final status
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return conn, brw, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
