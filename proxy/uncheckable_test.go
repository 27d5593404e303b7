package proxy_test

import (
	"testing"

	"github.com/authsidecar/authsidecar/proxy"
)

// TestAdminRoutesWithoutRoleLookupFailClosed: a proxy that has admin
// routes but no way to read roles (a verifier without a database) answers
// them 403 JSON, whoever asks with whatever valid token, and forwards none
// of them; other routes are served as before.
func TestAdminRoutesWithoutRoleLookupFailClosed(t *testing.T) {
	s := newStack(t, func(o *proxy.Options) { o.Roles = nil })
	_, uid, jwt := s.user("vera@example.com")
	tests := []struct {
		name, path string
		hdr        []string
		status     int
		forwarded  bool
	}{
		{"admin with a valid token", "/api/admin/users", bearer(jwt), 403, false},
		{"admin prefix itself", "/api/admin", bearer(jwt), 403, false},
		{"admin without a token", "/api/admin/users", nil, 401, false},
		{"business", "/api/tasks", bearer(jwt), 200, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.up.take()
			r := s.do("GET", tt.path, nil, tt.hdr...)
			if r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
			if r.status == 403 && (r.header.Get("Content-Type") != "application/json" || r.body != `{"message":"Forbidden","code":"FORBIDDEN"}`) {
				t.Errorf("refusal: %q %s, want the JSON FORBIDDEN body", r.header.Get("Content-Type"), r.body)
			}
			got := s.up.take()
			if tt.forwarded != (len(got) == 1) {
				t.Fatalf("upstream received %d requests, want forwarded=%v", len(got), tt.forwarded)
			}
			if tt.forwarded && got[0].Header.Get("X-User-Id") != uid {
				t.Errorf("forwarded without the user id: %v", got[0].Header)
			}
		})
	}
}
