package revocation

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Store is what a Poller reads: the store's revocations in id order.
// sqlstore.DB implements it.
type Store interface {
	// RevocationsSince returns up to limit revocations with ids above
	// after, in id order, and never one whose id is below one it returned
	// before (the store makes ids visible in order).
	RevocationsSince(ctx context.Context, after int64, limit int) ([]Record, error)
}

// PollerOptions configures NewPoller.
type PollerOptions struct {
	// Store is read. Required.
	Store Store
	// Set is filled, and swept of what its TTL says no token can need.
	// Required.
	Set *Set
	// Interval is the time between two polls (revocation.poll_interval).
	// Zero: 1s.
	Interval time.Duration
	// Feed, when set, is told every record read, with its id, so it can
	// serve them to verifiers. Zero: none.
	Feed *Feed
	// Metrics counts what is read. Zero: not counted.
	Metrics *Metrics
	// QueryContext decorates the context of every store query (the
	// sidecar labels them for the query metric). Zero: as is.
	QueryContext func(context.Context) context.Context
	// Logger; zero: slog.Default(). Now; zero: time.Now.
	Logger *slog.Logger
	Now    func() time.Time
}

// Poller keeps a Set up to date with a store: one indexed range read of
// the ids after the last one it read, per interval, whatever the traffic.
// It never reads a revocation twice (bar a restart) and never skips one:
// the store makes ids visible in order.
type Poller struct {
	o      PollerOptions
	cursor int64 // the last id read; only the poller's goroutine touches it
}

// pollBatch is the most rows one query reads: a backlog (a restart with a
// million revocations) is read in batches, back to back.
const pollBatch = 10000

// setSweepEvery is how often a poller drops from its set the entries past
// their TTL, on its own clock. The store's rows go with the store's
// sweeper (sqlstore.Sweeper), one replica at a time. An entry kept a
// little past its TTL covers only tokens that have expired anyway, and a
// rebuild of a million entries costs ~8 ms and 13 MB of garbage: once a
// minute, not at every poll.
const setSweepEvery = time.Minute

// NewPoller returns a poller; Load fills the set, Run keeps it current.
func NewPoller(o PollerOptions) *Poller {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.QueryContext == nil {
		o.QueryContext = func(ctx context.Context) context.Context { return ctx }
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Poller{o: o}
}

// Load reads every revocation the store holds into the set and makes the
// set usable: a process serves nothing before it. Call it once, before
// Run.
func (p *Poller) Load(ctx context.Context) error {
	start := p.o.Now()
	if err := p.poll(ctx); err != nil {
		p.o.Metrics.failed()
		return fmt.Errorf("load revocations: %w", err)
	}
	p.o.Set.MarkUsable()
	p.o.Logger.Info("revocations loaded", "held", p.o.Set.Len(), "last_id", p.cursor, "took", p.o.Now().Sub(start).Round(time.Millisecond).String())
	return nil
}

// Run polls until ctx ends. A failed poll is counted and logged (once per
// run of failures) and retried at the next interval; the set keeps what
// it holds. In full mode that is the right answer: while the database is
// unreachable from here, nobody can write a revocation through it either
// from here, and business requests keep their zero-query path.
func (p *Poller) Run(ctx context.Context) {
	tick := time.NewTicker(p.o.Interval)
	defer tick.Stop()
	lastSweep := p.o.Now()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := p.poll(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			p.o.Metrics.failed()
			if !failing {
				p.o.Logger.Warn("revocation poll failed; the revocations held stay in force, retrying every interval", "error", err.Error())
			}
			failing = true
			continue
		case failing:
			p.o.Logger.Info("revocation polls succeed again", "last_id", p.cursor)
			failing = false
		}
		if now := p.o.Now(); now.Sub(lastSweep) >= setSweepEvery {
			lastSweep = now
			p.o.Set.Sweep()
		}
	}
}

// poll reads everything after the cursor, in batches, into the set.
func (p *Poller) poll(ctx context.Context) error {
	for {
		qctx, cancel := context.WithTimeout(p.o.QueryContext(ctx), 10*time.Second)
		recs, err := p.o.Store.RevocationsSince(qctx, p.cursor, pollBatch)
		cancel()
		if err != nil {
			return err
		}
		if len(recs) > 0 {
			es := make([]Entry, len(recs))
			for i, r := range recs {
				es[i] = r.Entry()
			}
			p.o.Set.Add(es...)
			p.o.Metrics.receivedEntries(es)
			p.cursor = recs[len(recs)-1].ID
			if p.o.Feed != nil {
				p.o.Feed.append(recs, es)
			}
		}
		if len(recs) < pollBatch {
			p.o.Metrics.synced(p.o.Now())
			if p.o.Feed != nil {
				p.o.Feed.synced(p.cursor)
			}
			return nil
		}
	}
}
