package proxy

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"log/slog"
	"math/rand/v2"
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
// Inside Observe, so the 500 is counted and logged like any answer.
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
				log.Error("panic serving request", "panic", v, "path", LogPath(r.URL.EscapedPath()))
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
			id := requestID(r.Header)
			vals := []string{id}
			if !validRequestID(id) {
				// math/rand/v2's generator is ChaCha8 seeded by the OS:
				// unpredictable enough that ids reveal nothing about
				// traffic, without crypto/rand's getrandom(2) call.
				var b [12]byte
				binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
				binary.LittleEndian.PutUint32(b[8:], rand.Uint32())
				vals[0] = hex.EncodeToString(b[:])
				r.Header[requestIDHeader] = vals
			}
			w.Header()[requestIDHeader] = vals
			next.ServeHTTP(w, r)
		})
	}
}

// requestID reads X-Request-Id by map index: the server stores header
// names canonical, and Header.Get would re-canonicalize on every request.
func requestID(h http.Header) string {
	if v := h[requestIDHeader]; len(v) > 0 {
		return v[0]
	}
	return ""
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

// Observe records the request metrics and hands one entry per request to
// access (nil: no access log). It reads what the proxy learned (class,
// user, reason) from the RequestInfo it puts in the context.
func Observe(m *Metrics, access AccessLog) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			st := &observed{sw: statusWriter{ResponseWriter: w}}
			st.ctx.Context = r.Context()
			r = r.WithContext(&st.ctx)
			if m != nil {
				m.inflight.Add(1)
				defer m.inflight.Add(-1)
			}
			returned := false
			defer func() {
				if !returned {
					// A panic: http.ErrAbortHandler, an answer cut short (the
					// client left a stream, the upstream cut a body), which
					// the server recovers by closing the connection. The
					// request is still counted and logged, then the panic
					// goes on. (Recover, inside, turned any other into a 500.)
					// The proxy may know better why (a client too slow).
					reason := st.ctx.info.CloseReason()
					if reason == "" {
						reason = CloseReasonAborted
					}
					st.finish(m, access, r, start, reason)
				}
			}()
			next.ServeHTTP(&st.sw, r)
			returned = true
			st.finish(m, access, r, start, st.ctx.info.CloseReason())
		})
	}
}

// CloseReasonAborted is the access log's close_reason for an answer cut
// short: the connection was closed in the middle of it.
const CloseReasonAborted = "aborted"

// finish counts and logs the request once its handler is done.
func (st *observed) finish(m *Metrics, access AccessLog, r *http.Request, start time.Time, closeReason string) {
	info := &st.ctx.info
	status := st.sw.status
	if status == 0 {
		status = http.StatusOK
	}
	end := time.Now()
	elapsed := end.Sub(start)
	class := info.Class.String()
	if m != nil {
		m.observeRequest(info.Class, status, elapsed.Seconds())
		if info.Reason != "" {
			m.failures.WithLabelValues(class, info.Reason).Inc()
		}
	}
	if access == nil {
		return
	}
	path := info.path
	if path == "" {
		path = r.URL.EscapedPath()
	}
	path = LogPath(path)
	if len(path) > 256 {
		path = path[:256]
	}
	st.entry = AccessEntry{
		Time: end, Method: r.Method, Path: path, Class: class, Status: status,
		Duration: elapsed, Bytes: st.sw.bytes, RequestID: requestID(r.Header), UserID: info.UserID, Reason: info.Reason,
		CloseReason: closeReason,
	}
	access.LogRequest(r.Context(), &st.entry)
}

// observed is Observe's per-request state in one allocation instead of
// four: the context carrying the RequestInfo, the status writer and the
// log entry.
type observed struct {
	ctx   infoContext
	sw    statusWriter
	entry AccessEntry
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

func (w *statusWriter) Flush() { w.FlushError() }

// FlushError is Flush with its error, which http.ResponseController
// prefers to Flush: a write that fails at its deadline (a client below
// the minimum rate) must be seen by the proxy.
func (w *statusWriter) FlushError() error {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return conn, brw, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
