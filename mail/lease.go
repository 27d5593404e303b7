package mail

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// heldLease renews the lease on the rows of the batch being delivered,
// every lease/3, until stop.
type heldLease struct {
	w     *Worker
	until atomic.Int64 // UnixNano by w.now: the lease's end as last stored
	done  chan struct{}
	quit  chan struct{}
}

func (w *Worker) holdLease(claimed time.Time) *heldLease {
	l := &heldLease{w: w, done: make(chan struct{}), quit: make(chan struct{})}
	l.until.Store(claimed.Add(w.lease).UnixNano())
	go l.renew()
	return l
}

func (l *heldLease) renew() {
	defer close(l.done)
	w := l.w
	tick := time.NewTicker(w.lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-l.quit:
			return
		case <-tick.C:
		}
		now := w.now()
		ctx, cancel := context.WithTimeout(context.Background(), w.storeTimeout)
		_, err := w.q.RenewOutbox(ctx, w.owner, now.Add(w.lease))
		cancel()
		if err != nil {
			w.log.Warn("mail lease not renewed", "err", err)
			continue
		}
		l.until.Store(now.Add(w.lease).UnixNano())
	}
}

// held reports whether a send may start at now: the lease, as last
// stored, still runs for at least one renewal period.
func (l *heldLease) held(now time.Time) bool {
	return now.Add(l.w.lease / 3).Before(time.Unix(0, l.until.Load()))
}

// stop ends the renewals and waits for the one running, if any.
func (l *heldLease) stop() {
	close(l.quit)
	<-l.done
}

// release gives back claimed rows that were not tried, detached from the
// ending ctx and bounded like any write-back.
func (w *Worker) release(ctx context.Context, rows []Queued) {
	storeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.storeTimeout)
	defer cancel()
	for _, q := range rows {
		if err := w.q.ReleaseOutbox(storeCtx, q.ID, w.owner); err != nil && !errors.Is(err, ErrLeaseLost) {
			w.log.Warn("mail row not released: it waits for its lease to end", "id", q.ID, "err", err)
		}
	}
}
