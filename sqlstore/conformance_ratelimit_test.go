package sqlstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// testTakeToken: a bucket starts full, refuses with the wait until its
// next token once empty, and refills with the time passed in.
func testTakeToken(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	r := issuer.Rate{N: 3, Per: time.Minute} // a token every 20s
	steps := []struct {
		key      string
		at       time.Duration // since t0
		wantWait time.Duration // 0: allowed
	}{
		{"a", 0, 0},
		{"a", 0, 0},
		{"a", 0, 0},
		{"a", 0, 20 * time.Second},
		{"a", 0, 20 * time.Second}, // a refusal takes nothing
		{"b", 0, 0},                // keys are independent
		{"a", 10 * time.Second, 10 * time.Second},
		{"a", 5 * time.Second, 10 * time.Second}, // a clock behind does not refill
		{"a", 20 * time.Second, 0},
		{"a", 20 * time.Second, 20 * time.Second},
		{"a", 20*time.Second + 500*time.Millisecond, 19500 * time.Millisecond},
		// Refill stops at the burst.
		{"a", time.Hour, 0},
		{"a", time.Hour, 0},
		{"a", time.Hour, 0},
		{"a", time.Hour, 20 * time.Second},
		{"b", time.Hour, 0},
		{"b", time.Hour, 0},
		{"b", time.Hour, 0},
		{"b", time.Hour, 20 * time.Second},
	}
	for i, st := range steps {
		wait, err := db.TakeToken(ctx, st.key, r, t0.Add(st.at))
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if d := wait - st.wantWait; d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("step %d (%s at +%v): got wait %v, want %v", i, st.key, st.at, wait, st.wantWait)
		}
	}
}

// testTakeTokenConcurrentReplicas: takes from one bucket at the same
// instant through two replicas spend each token once.
func testTakeTokenConcurrentReplicas(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	handles := []*sqlstore.DB{db, e.replica(t)}
	const n, burst = 40, 5
	r := issuer.Rate{N: burst, Per: time.Hour}
	start := make(chan struct{})
	waits := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			waits[i], errs[i] = handles[i%2].TakeToken(ctx, "sign-in:same@example.com", r, t0)
		})
	}
	close(start)
	wg.Wait()
	allowed := 0
	for i := range n {
		switch {
		case errs[i] != nil:
			t.Errorf("take %d: %v", i, errs[i])
		case waits[i] == 0:
			allowed++
		}
	}
	if allowed != burst {
		t.Errorf("got %d of %d takes allowed, want the burst, %d", allowed, n, burst)
	}
}

// testTakeTokenSweepsOldBuckets: every 256th take also deletes buckets
// untouched for a day, so distinct emails cannot grow the table forever;
// a fresh bucket survives.
func testTakeTokenSweepsOldBuckets(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	r := issuer.Rate{N: 5, Per: time.Minute}
	if _, err := db.TakeToken(ctx, "old", r, t0.Add(-25*time.Hour)); err != nil {
		t.Fatal(err)
	}
	raw := e.db.raw(t)
	count := func(key string) int {
		t.Helper()
		var n int
		q := `SELECT count(*) FROM rate_limit WHERE key = ` + map[bool]string{true: "$1", false: "?"}[e.self.name == "postgres"]
		if err := raw.QueryRow(q, key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := 1; i < 255; i++ {
		if _, err := db.TakeToken(ctx, "fresh", issuer.Rate{N: 1000, Per: time.Minute}, t0); err != nil {
			t.Fatal(err)
		}
	}
	if count("old") != 1 {
		t.Fatal("the old bucket went before the 256th take")
	}
	if _, err := db.TakeToken(ctx, "fresh", issuer.Rate{N: 1000, Per: time.Minute}, t0); err != nil {
		t.Fatal(err)
	}
	if got := count("old"); got != 0 {
		t.Errorf("after 256 takes: got %d old buckets, want 0 (swept)", got)
	}
	if got := count("fresh"); got != 1 {
		t.Errorf("after the sweep: got %d fresh buckets, want 1", got)
	}
}
