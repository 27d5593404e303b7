package proxy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

func (c *KeyCache) refreshForMiss(ctx context.Context) error {
	c.mu.Lock()
	if ch := c.inflight; ch != nil {
		c.mu.Unlock()
		select { // join the read already running
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if !c.lastRead.IsZero() && c.o.Now().Sub(c.lastRead) < time.Duration(c.cooldown.Load()) {
		c.mu.Unlock()
		c.observe(TriggerUnknownKID, "skipped_cooldown")
		return ErrUnknownKID
	}
	c.mu.Unlock()
	// The read outlives the request that caused it: others wait on it.
	c.refresh(context.WithoutCancel(ctx), TriggerUnknownKID)
	return nil
}

func (c *KeyCache) refreshInBackground() {
	c.mu.Lock()
	if c.closed || c.bgRunning || c.inflight != nil || c.o.Now().Sub(c.lastRead) < time.Duration(c.cooldown.Load()) {
		c.mu.Unlock()
		return
	}
	c.bgRunning = true
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		c.refresh(c.ctx, TriggerMaxAge)
		c.mu.Lock()
		c.bgRunning = false
		c.mu.Unlock()
	}()
}

// refresh reads the source once, under ctx (request-triggered reads pass
// one without cancellation: others may be waiting on them; background
// reads pass c.ctx, so Close ends them). A failed read keeps the old keys
// (a database or JWKS hiccup must not turn into 401s for everyone) and
// starts the retry loop.
func (c *KeyCache) refresh(ctx context.Context, trigger string) error {
	c.mu.Lock()
	if ch := c.inflight; ch != nil {
		c.mu.Unlock()
		<-ch
		return nil
	}
	ch := make(chan struct{})
	c.inflight = ch
	c.lastRead = c.o.Now()
	c.mu.Unlock()

	keys, err := c.read(ctx)

	c.mu.Lock()
	defer func() {
		c.inflight = nil
		c.addedDuring = nil
		close(ch)
		c.mu.Unlock()
	}()
	if err != nil {
		// Under mu, with the retry loop's own check: a failure either finds
		// the loop running (it will see failing) or starts it.
		c.failing.Store(true)
		c.startRetryLocked()
		c.observe(trigger, "error")
		c.o.Logger.Error("key set refresh failed; keeping the previous keys and retrying",
			"trigger", trigger, "keys", len(c.set.Load().keys), "usable", c.usable(c.set.Load()), "error", err.Error())
		return fmt.Errorf("refresh keys: %w", err)
	}
	c.publishLocked(keys, trigger)
	c.o.Logger.Debug("key set refreshed", "trigger", trigger, "keys", len(keys))
	return nil
}

// startRetryLocked starts the retry loop unless it runs or the cache is
// closed. c.mu must be held.
func (c *KeyCache) startRetryLocked() {
	if c.retrying || c.closed {
		return
	}
	c.retrying = true
	c.wg.Add(1)
	go c.retry()
}

// retry re-reads the source with exponential backoff until a read (its
// own or anyone's) succeeds, or Close.
func (c *KeyCache) retry() {
	defer c.wg.Done()
	wait := c.o.RetryBackoff
	for {
		d := wait/2 + rand.N(wait/2+1)
		c.nextRetry.Store(c.o.Now().Add(d).UnixNano())
		t := time.NewTimer(d)
		select {
		case <-c.ctx.Done():
			t.Stop()
		case <-t.C:
		}
		if c.retryOver() {
			return
		}
		c.refresh(c.ctx, TriggerRetry)
		if c.retryOver() {
			return
		}
		wait = min(wait*2, c.o.RetryBackoffMax)
	}
}

// retryOver reports whether the retry loop should end (a read succeeded,
// or Close), and if so marks it ended, under the same lock refresh records
// a failure with: no failure can fall between the loop's last look and
// its end unseen.
func (c *KeyCache) retryOver() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failing.Load() && !c.closed {
		return false
	}
	c.retrying = false
	c.nextRetry.Store(0)
	return true
}

func (c *KeyCache) observe(trigger, result string) {
	if c.o.OnRefresh != nil {
		c.o.OnRefresh(trigger, result)
	}
}
