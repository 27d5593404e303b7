package issuer

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// waitingPerSlot bounds the queue for hashing slots: 32 per slot is ~2.5 s
// of hashing at Better Auth's cost, within a request's deadline. Beyond it
// a request is answered 503 with Retry-After at once.
const waitingPerSlot = 32

// hashSlots hands out a fixed number of hashing slots, fairly among
// clients. When every slot is taken, requests wait in a queue per client
// (the client IP, grouped as the per-IP limits group it), and a freed slot
// goes to the clients in turn: a client with eighty requests waiting gets
// one slot per turn, as a client with one does. So a flood from one source
// (one account posting wrong passwords to change-password, one address
// posting sign-ins) delays another client's hash by about one hash per
// flooding client. The queue holds at most total requests; when it is
// full, a newcomer takes the place of the newest request of the client
// with the most waiting (that one is answered busy), unless the newcomer's
// own client has as many: a flood fills only what nobody else wants, and
// a lone client still has the whole queue.
//
// A hash may take more than one slot (acquireN): a foreign hash that
// computes on several cores, or needs more memory than one slot's share
// (hasher.foreign). The client whose turn it is waits until its oldest
// request's slots are free, and nobody passes it meanwhile: a request
// for every slot is not starved by single-slot ones.
type hashSlots struct {
	n     int // slots
	total int // waiting requests, all clients

	mu      sync.Mutex
	busy    int
	waiting int
	queues  map[string][]*slotWaiter // per client, oldest first
	turns   []string                 // clients with a request waiting, in the order they are served
}

// slotWaiter is one queued request: ready is closed when a slot has been
// handed to it (granted) or its place taken by another client's (evicted).
type slotWaiter struct {
	ready            chan struct{}
	slots            int
	granted, evicted bool
}

func newHashSlots(n int) *hashSlots {
	return &hashSlots{n: n, total: waitingPerSlot * n, queues: map[string][]*slotWaiter{}}
}

// acquire takes a slot for client, waiting in client's queue until one is
// free, giveUp fires (errHashBusy) or ctx ends (errHashBusy for a
// deadline, else ctx's error). It is errHashBusy at once, or later, when
// the queue is full of requests of clients with fewer waiting.
func (s *hashSlots) acquire(ctx context.Context, client string, giveUp <-chan time.Time) error {
	return s.acquireN(ctx, client, giveUp, 1)
}

// acquireN is acquire for a hash that holds n slots (1 to s.n);
// releaseN(n) gives them back.
func (s *hashSlots) acquireN(ctx context.Context, client string, giveUp <-chan time.Time, n int) error {
	s.mu.Lock()
	if s.busy+n <= s.n && s.waiting == 0 {
		s.busy += n // free slots are taken whatever the clock says
		s.mu.Unlock()
		return nil
	}
	// A bounded queue: a request that could not get a slot before its
	// deadline anyway is told so at once, and holds no memory meanwhile.
	if s.waiting >= s.total && !s.evictFor(client) {
		s.mu.Unlock()
		return errHashBusy
	}
	w := &slotWaiter{ready: make(chan struct{}), slots: n}
	q := s.queues[client]
	if len(q) == 0 {
		s.turns = append(s.turns, client)
	}
	s.queues[client] = append(q, w)
	s.waiting++
	s.mu.Unlock()

	var err error
	select {
	case <-w.ready:
		if w.evicted {
			return errHashBusy
		}
		return nil
	case <-giveUp:
		err = errHashBusy
	case <-ctx.Done():
		err = ctx.Err()
		if errors.Is(err, context.DeadlineExceeded) {
			err = errHashBusy
		}
	}
	s.abandon(client, w)
	return err
}

// abandon takes a waiter that gave up out of the queue; one handed its
// slots as it gave up passes them on.
func (s *hashSlots) abandon(client string, w *slotWaiter) {
	s.mu.Lock()
	switch {
	case w.granted:
		s.mu.Unlock()
		s.releaseN(w.slots)
		return
	case !w.evicted:
		s.remove(client, w)
		// It may have been the one the others waited behind.
		s.grant()
	}
	s.mu.Unlock()
}

// evictFor frees a place in the full queue for a request of client: the
// newest request of the client with the most waiting gives it up, if
// that client has more waiting than client would after joining. The
// caller holds mu.
func (s *hashSlots) evictFor(client string) bool {
	longest, most := "", 0
	for c, q := range s.queues {
		if len(q) > most {
			longest, most = c, len(q)
		}
	}
	if longest == client || most <= len(s.queues[client])+1 {
		return false
	}
	w := s.queues[longest][most-1]
	s.remove(longest, w)
	w.evicted = true
	close(w.ready)
	return true
}

// remove takes a waiter out of client's queue. The caller holds mu.
func (s *hashSlots) remove(client string, w *slotWaiter) {
	q := slices.DeleteFunc(s.queues[client], func(x *slotWaiter) bool { return x == w })
	s.waiting--
	if len(q) > 0 {
		s.queues[client] = q
		return
	}
	delete(s.queues, client)
	s.turns = slices.DeleteFunc(s.turns, func(c string) bool { return c == client })
}

// queued is how many requests wait for a slot.
func (s *hashSlots) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// release frees a slot.
func (s *hashSlots) release() { s.releaseN(1) }

// releaseN frees n slots, handing them straight to the waiting requests
// (grant).
func (s *hashSlots) releaseN(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy -= n
	s.grant()
}

// grant hands free slots to the oldest request of the client whose turn
// it is, who then goes to the back of the line, for as long as that
// request's slots are free. The caller holds mu.
func (s *hashSlots) grant() {
	for len(s.turns) > 0 {
		client := s.turns[0]
		q := s.queues[client]
		w := q[0]
		if s.busy+w.slots > s.n {
			return
		}
		s.busy += w.slots
		s.turns = s.turns[1:]
		s.waiting--
		if q = q[1:]; len(q) > 0 {
			s.queues[client] = q
			s.turns = append(s.turns, client)
		} else {
			delete(s.queues, client)
		}
		w.granted = true
		close(w.ready)
	}
}

// hashClientKey carries the client a hash is computed for.
type hashClientKey struct{}

// withHashClient names the client whose requests share one turn in the
// hashing queue.
func withHashClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, hashClientKey{}, client)
}

// hashClient is the client withHashClient named; "" (one shared turn)
// outside a request.
func hashClient(ctx context.Context) string {
	c, _ := ctx.Value(hashClientKey{}).(string)
	return c
}
