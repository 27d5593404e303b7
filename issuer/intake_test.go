package issuer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestIntakeBounded: at most `workers` jobs run at once, at most `backlog`
// are accepted (running or waiting), and every accepted job runs.
func TestIntakeBounded(t *testing.T) {
	in := newIntake(3, 1)
	release := make(chan struct{})
	var running, maxRunning, ran atomic.Int32
	job := func(context.Context) {
		n := running.Add(1)
		for {
			m := maxRunning.Load()
			if n <= m || maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		running.Add(-1)
		ran.Add(1)
	}
	for i := range 3 {
		if !in.run(context.Background(), job) {
			t.Fatalf("job %d refused with room in the backlog", i)
		}
	}
	if in.run(context.Background(), job) {
		t.Fatal("a fourth job accepted into a backlog of 3")
	}
	close(release)
	in.wg.Wait()
	if ran.Load() != 3 || maxRunning.Load() != 1 {
		t.Errorf("ran %d jobs, at most %d at once; want 3, one at a time", ran.Load(), maxRunning.Load())
	}
	// Room again once they are done.
	done := make(chan struct{})
	if !in.run(context.Background(), func(context.Context) { close(done) }) {
		t.Fatal("refused after the backlog drained")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("job did not run")
	}
}

// TestIntakeOutlivesTheRequest: a job runs with a context that the
// request's end does not cancel.
func TestIntakeOutlivesTheRequest(t *testing.T) {
	in := newIntake(1, 1)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	in.run(ctx, func(ctx context.Context) {
		time.Sleep(20 * time.Millisecond)
		got <- ctx.Err()
	})
	cancel()
	if err := <-got; err != nil {
		t.Errorf("job's context ended with the request's: %v", err)
	}
}

// TestDrainClosesTheIntake: after Drain, work is refused (the handler
// answers 503) instead of racing the wait.
func TestDrainClosesTheIntake(t *testing.T) {
	iss := &Issuer{rec: &recovery{intake: newIntake(4, 1)}}
	ran := make(chan struct{})
	if !iss.rec.intake.run(context.Background(), func(context.Context) { close(ran) }) {
		t.Fatal("refused before Drain")
	}
	iss.Drain()
	select {
	case <-ran:
	default:
		t.Fatal("Drain returned before the queued job ran")
	}
	if iss.rec.intake.run(context.Background(), func(context.Context) {}) {
		t.Fatal("accepted after Drain")
	}
}
