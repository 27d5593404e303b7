package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestPasswordHashesCounted: the gauge is counted once at start, then at
// a scrape at most once a minute however many scrapes come; a failed
// count keeps the last one; every format is exported, at 0 when no user
// has it.
func TestPasswordHashesCounted(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	var result map[string]int64
	var fail error
	count := func(context.Context) (map[string]int64, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return result, fail
	}
	set := func(r map[string]int64, err error) {
		mu.Lock()
		defer mu.Unlock()
		result, fail = r, err
	}
	counted := func() int {
		mu.Lock()
		defer mu.Unlock()
		return calls
	}
	var clockMu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	advance := func(d time.Duration) { clockMu.Lock(); defer clockMu.Unlock(); now = now.Add(d) }

	p := newPasswordHashes(count, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p.now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(p)
	scrape := func() map[string]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
		return got
	}
	want := func(scrypt, bcrypt, other float64) string {
		m := map[string]float64{}
		for _, f := range passwordFormats() {
			m[f] = map[string]float64{"scrypt": scrypt, "bcrypt": bcrypt, "other": other}[f]
		}
		return fmt.Sprint(m)
	}

	// The count at start fails: no series until one succeeds.
	set(nil, errors.New("database is down"))
	p.countNow()
	if got := scrape(); len(got) != 0 {
		t.Errorf("after a failed first count: got %v, want no series", got)
	}
	if got := counted(); got != 1 {
		t.Fatalf("got %d counts, want 1: a scrape within the minute does not count again", got)
	}

	set(map[string]int64{"scrypt": 3, "bcrypt": 2, "other": 1}, nil)
	advance(time.Minute)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { scrape() })
	}
	wg.Wait()
	if got := counted(); got != 2 {
		t.Errorf("10 scrapes a minute later: got %d counts in all, want 2", got)
	}
	if got := fmt.Sprint(scrape()); got != want(3, 2, 1) {
		t.Errorf("got %s, want %s", got, want(3, 2, 1))
	}

	// A failed count keeps the last one, and waits its minute.
	set(nil, errors.New("timeout"))
	advance(time.Minute)
	for range 2 {
		if got := fmt.Sprint(scrape()); got != want(3, 2, 1) {
			t.Errorf("after a failed count: got %s, want %s", got, want(3, 2, 1))
		}
	}
	if got := counted(); got != 3 {
		t.Errorf("got %d counts in all, want 3", got)
	}
	set(map[string]int64{"scrypt": 6}, nil)
	advance(59 * time.Second)
	if got := fmt.Sprint(scrape()); got != want(3, 2, 1) {
		t.Errorf("59 s later: got %s, want the last count %s", got, want(3, 2, 1))
	}
	advance(time.Second)
	if got := fmt.Sprint(scrape()); got != want(6, 0, 0) {
		t.Errorf("a minute later: got %s, want %s", got, want(6, 0, 0))
	}
}
