package proxy

import (
	"net/http/httptest"
	"testing"
)

func TestClientIP(t *testing.T) {
	trusted, err := ParsePrefixes([]string{"10.0.0.0/8", "192.0.2.10"})
	if err != nil {
		t.Fatal(err)
	}
	ip := ClientIP(trusted)
	tests := []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"untrusted peer, no header", "203.0.113.5:1234", nil, "203.0.113.5"},
		{"untrusted peer lies", "203.0.113.5:1234", []string{"1.2.3.4"}, "203.0.113.5"},
		{"trusted peer", "10.1.2.3:80", []string{"198.51.100.7"}, "198.51.100.7"},
		{"trusted chain", "10.1.2.3:80", []string{"198.51.100.7, 192.0.2.10, 10.9.9.9"}, "198.51.100.7"},
		{"spoofed left part ignored", "10.1.2.3:80", []string{"6.6.6.6, 198.51.100.7"}, "198.51.100.7"},
		{"two header lines", "10.1.2.3:80", []string{"6.6.6.6", "198.51.100.7"}, "198.51.100.7"},
		{"garbage", "10.1.2.3:80", []string{"not-an-ip"}, "10.1.2.3"},
		{"all trusted", "10.1.2.3:80", []string{"10.0.0.1"}, "10.1.2.3"},
		{"ipv6 peer", "[2001:db8::1]:443", []string{"1.2.3.4"}, "2001:db8::1"},
		{"mapped v4 peer", "[::ffff:10.1.2.3]:80", []string{"198.51.100.7"}, "198.51.100.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.peer
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := ip(r); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := ParsePrefixes([]string{"10.0.0.0/33"}); err == nil {
		t.Error("bad CIDR accepted")
	}
}

func TestHostAllowed(t *testing.T) {
	allowed := []string{"app.example.com", "api.example.com:8443", "[2001:db8::1]"}
	tests := []struct {
		host string
		want bool
	}{
		{"app.example.com", true},
		{"APP.example.com:8080", true},
		{"api.example.com:8443", true},
		{"api.example.com", false},
		{"api.example.com:9999", false},
		{"[2001:db8::1]:80", true},
		{"evil.example.com", false},
		{"app.example.com.evil.com", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := hostAllowed(allowed, tt.host); got != tt.want {
			t.Errorf("hostAllowed(%q): got %v, want %v", tt.host, got, tt.want)
		}
	}
	if !hostAllowed(nil, "anything") {
		t.Error("no list must allow any host")
	}
}
