package issuer

// The recovery intake: requests that must answer before the user lookup
// (so a known address answers as fast as an unknown one) hand their work
// to a bounded backlog run by a few workers.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// intake runs the work behind a request whose answer must not depend on
// it (does this address have an account?) after the answer is sent, so
// known and unknown addresses are answered in the same time. Jobs wait in
// a bounded backlog and run a few at a time: the store serializes writes
// anyway, and a flood must not become thousands of concurrent
// transactions. When the backlog is full, callers get 503 whatever the
// address.
type intake struct {
	queued  atomic.Int64
	backlog int64
	running chan struct{} // one token per job running now
	mu      sync.Mutex    // orders run's wg.Add before close's wg.Wait
	closed  bool
	wg      sync.WaitGroup
}

// Intake sizes: the backlog absorbs a burst (per-IP limits keep one
// client far below it); the workers are enough to keep a store busy.
const (
	intakeBacklog = 4096
	intakeWorkers = 4
)

func newIntake(backlog, workers int) *intake {
	return &intake{backlog: int64(backlog), running: make(chan struct{}, workers)}
}

// intakeTimeout bounds one job once it runs.
const intakeTimeout = 15 * time.Second

// run queues f, detached from the request; false when the backlog is full.
func (in *intake) run(ctx context.Context, f func(context.Context)) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed || in.queued.Add(1) > in.backlog {
		if !in.closed {
			in.queued.Add(-1)
		}
		return false
	}
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		defer in.queued.Add(-1)
		in.running <- struct{}{}
		defer func() { <-in.running }()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), intakeTimeout)
		defer cancel()
		f(ctx)
	}()
	return true
}

// Wait returns once the work queued after answered requests (reset and
// verification mail) has finished. Requests may still be arriving: work
// they queue meanwhile may or may not be waited for.
func (iss *Issuer) Wait() {
	in := iss.rec.intake
	in.mu.Lock() // no run between reading the count and waiting
	defer in.mu.Unlock()
	in.wg.Wait()
}

// Drain stops taking such work and waits for what was queued: call it
// once the server has stopped, before closing the store. A request still
// running past the shutdown grace then gets 503.
func (iss *Issuer) Drain() {
	in := iss.rec.intake
	in.mu.Lock()
	in.closed = true
	in.mu.Unlock()
	in.wg.Wait()
}
