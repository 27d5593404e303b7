package issuer

import (
	"fmt"
	"testing"
	"time"
)

func TestLimiterTableBounded(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := newLimiter(Rate{N: 1, Per: time.Hour}, 64, func() time.Time { return now })
	for i := range maxLimiterKeys + 5000 {
		l.allow(fmt.Sprint("198.51.100.", i))
	}
	if n := len(l.keys); n > maxLimiterKeys {
		t.Fatalf("got %d keys, want at most %d", n, maxLimiterKeys)
	}
	if newLimiter(Rate{}, 64, time.Now) != nil {
		t.Error("a zero Rate made a limiter")
	}
	var off *limiter
	if ok, _ := off.allow("x"); !ok {
		t.Error("no limiter refused")
	}
}

func TestClientKey(t *testing.T) {
	tests := []struct {
		ip   string
		bits int
		want string
	}{
		{"192.0.2.7", 64, "192.0.2.7"},
		{"::ffff:192.0.2.7", 64, "192.0.2.7"},
		{"2001:db8:1:2:3:4:5:6", 64, "2001:db8:1:2::/64"},
		{"2001:DB8:1:2::1", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:3:4:5:6", 48, "2001:db8:1::/48"},
		{"2001:db8:1:2:3:4:5:6", 128, "2001:db8:1:2:3:4:5:6"},
		{"fe80::1%eth0", 64, "fe80::/64"},
		{"not an address", 64, "not an address"},
		{"", 64, ""},
	}
	for _, tt := range tests {
		if got := clientKey(tt.ip, tt.bits); got != tt.want {
			t.Errorf("clientKey(%q, %d) = %q, want %q", tt.ip, tt.bits, got, tt.want)
		}
	}
}
