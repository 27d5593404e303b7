package proxy

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
)

// secretPathPrefixes are paths whose next segment is a credential: the
// issuer's password-reset links carry their token there
// (/api/auth/reset-password/{token}), and opening the link does not spend
// it, so a log line with it would be a working reset.
var secretPathPrefixes = []string{"/api/auth/reset-password/"}

// LogPath is p as a log line may hold it: the segment after a
// secret-bearing prefix is replaced by "[token]".
func LogPath(p string) string {
	for _, pre := range secretPathPrefixes {
		if len(p) > len(pre) && strings.EqualFold(p[:len(pre)], pre) {
			return p[:len(pre)] + "[token]"
		}
	}
	return p
}

// AccessEntry is one finished request as the access log records it. It
// never holds a token, a cookie or a query string (the query may carry
// ?token=).
type AccessEntry struct {
	Time      time.Time // when the response ended
	Method    string
	Path      string // canonical path, at most 256 bytes
	Class     string
	Status    int
	Duration  time.Duration
	Bytes     int64 // response body bytes
	RequestID string
	UserID    string // "" when not authenticated
	Reason    string // "" unless refused
	// CloseReason is why the proxy ended the request itself: it closed a
	// WebSocket tunnel (token_expired), its client was too slow
	// (slow_body, slow_read), or the answer was cut short (aborted); ""
	// otherwise. An upgrade's line is written when the tunnel ends, so
	// Duration is the tunnel's life.
	CloseReason string
}

// AccessLog receives one entry per request from Observe.
type AccessLog interface {
	LogRequest(ctx context.Context, e *AccessEntry)
}

// SlogAccessLog writes each entry as an info record "request" through
// log, in whatever format its handler has, and nothing when log is above
// info.
func SlogAccessLog(log *slog.Logger) AccessLog { return slogAccess{log} }

type slogAccess struct{ log *slog.Logger }

func (s slogAccess) LogRequest(ctx context.Context, e *AccessEntry) {
	if !s.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	r := slog.NewRecord(e.Time, slog.LevelInfo, "request", 0)
	r.AddAttrs(
		slog.String("method", e.Method),
		slog.String("path", e.Path),
		slog.String("class", e.Class),
		slog.Int("status", e.Status),
		slog.Duration("duration", e.Duration),
		slog.Int64("bytes", e.Bytes),
		slog.String("request_id", e.RequestID),
	)
	if e.UserID != "" {
		r.AddAttrs(slog.String("user_id", e.UserID))
	}
	if e.Reason != "" {
		r.AddAttrs(slog.String("reason", e.Reason))
	}
	if e.CloseReason != "" {
		r.AddAttrs(slog.String("close_reason", e.CloseReason))
	}
	_ = s.log.Handler().Handle(ctx, r)
}

// JSONAccessLog writes each entry to w as one JSON line, byte for byte
// what SlogAccessLog writes through slog.NewJSONHandler(w, nil), in one
// Write call. slog spends about 4 µs per line on attribute handling,
// which was the largest single cost of a proxied request; this encoder
// appends into a pooled buffer. An entry with a string that JSON would
// have to escape (rare: paths and ids are checked ASCII) goes through
// fallback, so the rules for escaping live in one place, slog's.
func JSONAccessLog(w io.Writer, fallback *slog.Logger) AccessLog {
	return &jsonAccess{w: w, fallback: slogAccess{fallback}}
}

type jsonAccess struct {
	w        io.Writer
	fallback slogAccess
}

var lineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (j *jsonAccess) LogRequest(ctx context.Context, e *AccessEntry) {
	if y := e.Time.Year(); y < 0 || y > 9999 ||
		!plainJSON(e.Method) || !plainJSON(e.Path) || !plainJSON(e.Class) ||
		!plainJSON(e.RequestID) || !plainJSON(e.UserID) || !plainJSON(e.Reason) || !plainJSON(e.CloseReason) {
		j.fallback.LogRequest(ctx, e)
		return
	}
	bp := lineBuffers.Get().(*[]byte)
	b := append((*bp)[:0], `{"time":"`...)
	b = e.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"request","method":"`...)
	b = append(b, e.Method...)
	b = append(b, `","path":"`...)
	b = append(b, e.Path...)
	b = append(b, `","class":"`...)
	b = append(b, e.Class...)
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, `,"duration":`...)
	b = strconv.AppendInt(b, int64(e.Duration), 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, e.Bytes, 10)
	b = append(b, `,"request_id":"`...)
	b = append(b, e.RequestID...)
	b = append(b, '"')
	if e.UserID != "" {
		b = append(b, `,"user_id":"`...)
		b = append(b, e.UserID...)
		b = append(b, '"')
	}
	if e.Reason != "" {
		b = append(b, `,"reason":"`...)
		b = append(b, e.Reason...)
		b = append(b, '"')
	}
	if e.CloseReason != "" {
		b = append(b, `,"close_reason":"`...)
		b = append(b, e.CloseReason...)
		b = append(b, '"')
	}
	b = append(b, "}\n"...)
	_, _ = j.w.Write(b)
	if cap(b) <= 4<<10 { // an odd giant line is not kept
		*bp = b
		lineBuffers.Put(bp)
	}
}

// plainJSON reports whether s is printable ASCII without '"' or '\',
// which JSON (and slog) copy unescaped.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
