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
