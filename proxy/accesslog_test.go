package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/proxy"
)

// The hand-written JSON encoder must write exactly what slog's JSON
// handler writes for the same entry, so a log pipeline cannot tell which
// one ran; entries it cannot encode plainly go through slog itself.
func TestJSONAccessLogMatchesSlog(t *testing.T) {
	at := time.Date(2026, 11, 24, 5, 6, 7, 890123000, time.UTC)
	base := proxy.AccessEntry{
		Time: at, Method: "GET", Path: "/api/tasks", Class: "business", Status: 200,
		Duration: 1234567 * time.Nanosecond, Bytes: 54, RequestID: "0123456789abcdef01234567",
		UserID: "akmP7XXOjOYFZoWiiVeu21wGxffpg2mz",
	}
	with := func(f func(e *proxy.AccessEntry)) proxy.AccessEntry { e := base; f(&e); return e }
	tests := []struct {
		name string
		e    proxy.AccessEntry
		// invalid: slog itself writes a line that is not JSON (an error
		// marker before the time); the encoder matches it anyway.
		invalid bool
		// viaSlog: a string needs escaping, so the fallback writes it.
		viaSlog bool
	}{
		{"business", base, false, false},
		{"refused", with(func(e *proxy.AccessEntry) { e.UserID, e.Reason, e.Status = "", "expired", 401 }), false, false},
		{"tunnel closed for expiry", with(func(e *proxy.AccessEntry) {
			e.Method, e.Path, e.Class, e.Status, e.CloseReason = "GET", "/ws/chat", "websocket", 101, proxy.CloseReasonTokenExpired
		}), false, false},
		{"close reason needing escapes", with(func(e *proxy.AccessEntry) { e.CloseReason = "a\"b" }), false, true},
		{"zero nanoseconds", with(func(e *proxy.AccessEntry) { e.Time = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }), false, false},
		{"zone offset", with(func(e *proxy.AccessEntry) { e.Time = at.In(time.FixedZone("X", 5*3600+1800)) }), false, false},
		{"html characters", with(func(e *proxy.AccessEntry) { e.Path = "/api/<a>&b" }), false, false},
		{"quote in user id", with(func(e *proxy.AccessEntry) { e.UserID = `a"b\c` }), false, true},
		{"control character", with(func(e *proxy.AccessEntry) { e.Path = "/api/a\x01b" }), false, true},
		{"non-ASCII", with(func(e *proxy.AccessEntry) { e.Path = "/api/é\u2028\xff" }), false, true},
		{"year 10000", with(func(e *proxy.AccessEntry) { e.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }), true, true},
		{"negative duration and zeros", with(func(e *proxy.AccessEntry) { e.Duration, e.Bytes, e.Status, e.RequestID = -5, 0, 0, "" }), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want, got bytes.Buffer
			proxy.SlogAccessLog(slog.New(slog.NewJSONHandler(&want, nil))).LogRequest(context.Background(), &tt.e)
			var fast, slow bytes.Buffer
			proxy.JSONAccessLog(&fast, slog.New(slog.NewJSONHandler(&slow, nil))).LogRequest(context.Background(), &tt.e)
			if tt.viaSlog != (slow.Len() > 0) || tt.viaSlog == (fast.Len() > 0) {
				t.Fatalf("want written by slog: %v; fast wrote %q, slog wrote %q", tt.viaSlog, fast.String(), slow.String())
			}
			got.Write(fast.Bytes())
			got.Write(slow.Bytes())
			if got.String() != want.String() {
				t.Fatalf("lines differ\nslog: %s\nfast: %s", want.String(), got.String())
			}
			if strings.Count(got.String(), "\n") != 1 {
				t.Fatalf("want exactly one line, got %q", got.String())
			}
			if !tt.invalid && !json.Valid(bytes.TrimSpace(got.Bytes())) {
				t.Fatalf("not JSON: %s", got.String())
			}
		})
	}
}

// An access log above info level writes nothing, like the logger would.
func TestSlogAccessLogHonoursLevel(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e := proxy.AccessEntry{Time: time.Now(), Method: "GET", Path: "/api/x\x01", Class: "business", Status: 200}
	proxy.SlogAccessLog(log).LogRequest(context.Background(), &e)
	proxy.JSONAccessLog(&buf, log).LogRequest(context.Background(), &e) // falls back: control character
	if buf.Len() != 0 {
		t.Fatalf("wrote %q above info level", buf.String())
	}
}

func TestLogPath(t *testing.T) {
	for in, want := range map[string]string{
		"/api/auth/reset-password/abcDEF_-123": "/api/auth/reset-password/[token]",
		"/api/auth/reset-password/abc/def":     "/api/auth/reset-password/[token]",
		"/API/AUTH/reset-password/abc":         "/API/AUTH/reset-password/[token]",
		"/api/auth/reset-password/":            "/api/auth/reset-password/",
		"/api/auth/reset-password":             "/api/auth/reset-password",
		"/api/auth/reset-password-page":        "/api/auth/reset-password-page",
		"/api/tasks/reset-password/abc":        "/api/tasks/reset-password/abc",
		"/api/auth/sign-in/email":              "/api/auth/sign-in/email",
	} {
		if got := proxy.LogPath(in); got != want {
			t.Errorf("LogPath(%q) = %q, want %q", in, got, want)
		}
	}
}
