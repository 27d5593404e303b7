package issuer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// queueUp starts a request of client waiting for a slot and returns once
// it is queued; its outcome arrives on got as "client" or "client:busy".
func queueUp(t *testing.T, s *hashSlots, client string, got chan<- string) {
	t.Helper()
	s.mu.Lock()
	before := len(s.queues[client])
	s.mu.Unlock()
	go func() {
		if err := s.acquire(context.Background(), client, nil); err != nil {
			got <- client + ":busy"
			return
		}
		got <- client
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		n := len(s.queues[client])
		s.mu.Unlock()
		if n > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's request never queued", client)
		}
	}
}

// TestHashSlotsTakeTurns: with one slot busy, five requests of one client
// queued before one of another, the freed slot goes to the clients in
// turn: the second client waits one hash, not five.
func TestHashSlotsTakeTurns(t *testing.T) {
	s := newHashSlots(1)
	if err := s.acquire(context.Background(), "main", nil); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 16)
	for range 5 {
		queueUp(t, s, "flood", got)
	}
	queueUp(t, s, "victim", got)
	queueUp(t, s, "other", got)
	var order []string
	for range 7 {
		s.release() // the holder is done: the slot passes to the next turn
		order = append(order, <-got)
	}
	s.release()
	if want := "flood victim other flood flood flood flood"; strings.Join(order, " ") != want {
		t.Errorf("slots went to %v, want %s", order, want)
	}
	if s.busy != 0 || s.waiting != 0 || len(s.queues) != 0 || len(s.turns) != 0 {
		t.Errorf("after all: busy %d, waiting %d, queues %v, turns %v; want all empty", s.busy, s.waiting, s.queues, s.turns)
	}
}

// TestHashSlotsFullQueue: a lone client may fill the whole queue; once it
// is full, another client's request takes the place of the flood's
// newest (answered busy), while the flood's own next request is refused.
func TestHashSlotsFullQueue(t *testing.T) {
	s := newHashSlots(1)
	if err := s.acquire(context.Background(), "main", nil); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 4*waitingPerSlot)
	for range waitingPerSlot {
		queueUp(t, s, "flood", got)
	}
	if err := s.acquire(context.Background(), "flood", nil); !errors.Is(err, errHashBusy) {
		t.Fatalf("the flood's request beyond the queue: got %v, want errHashBusy", err)
	}
	queueUp(t, s, "victim", got)
	if r := <-got; r != "flood:busy" {
		t.Fatalf("the victim's request in a full queue: %q answered, want the flood's newest busy", r)
	}
	if err := s.acquire(context.Background(), "flood", nil); !errors.Is(err, errHashBusy) {
		t.Errorf("the flood again: got %v, want errHashBusy", err)
	}
	s.release()
	if r := <-got; r != "flood" {
		t.Errorf("first turn: %q, want the flood's oldest", r)
	}
	s.release()
	if r := <-got; r != "victim" {
		t.Errorf("second turn: %q, want the victim", r)
	}
	// A client with as many waiting as the longest queue is refused, not
	// let in at its expense: two clients split the queue.
	s.mu.Lock()
	waiting, flood := s.waiting, len(s.queues["flood"])
	s.mu.Unlock()
	if waiting != flood || waiting != waitingPerSlot-2 {
		t.Fatalf("queue: %d waiting, %d of them the flood's; want %d, all the flood's", waiting, flood, waitingPerSlot-2)
	}
	for i := range waitingPerSlot {
		queueUp(t, s, "second", got)
		if i < 2 {
			continue // two free places, taken without eviction
		}
		if r := <-got; r != "flood:busy" {
			t.Fatalf("second client's request %d: %q answered, want the flood's newest busy", i, r)
		}
		s.mu.Lock()
		f, sec := len(s.queues["flood"]), len(s.queues["second"])
		s.mu.Unlock()
		if f+1 <= sec+1 {
			if err := s.acquire(context.Background(), "second", nil); !errors.Is(err, errHashBusy) {
				t.Fatalf("with %d of the flood's and %d of its own waiting: got %v, want errHashBusy", f, sec, err)
			}
			break
		}
	}
	s.mu.Lock()
	f, sec := len(s.queues["flood"]), len(s.queues["second"])
	s.mu.Unlock()
	if f-sec > 1 || sec-f > 1 {
		t.Errorf("two clients in a full queue: %d and %d waiting, want an even split", f, sec)
	}
}

// TestHashSlotsGiveUp: a request that gives up leaves the queue as it
// was, and a slot handed to a request as it gave up goes to the next.
func TestHashSlotsGiveUp(t *testing.T) {
	s := newHashSlots(1)
	if err := s.acquire(context.Background(), "main", nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.acquire(ctx, "a", nil) }()
	for {
		s.mu.Lock()
		n := s.waiting
		s.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	got := make(chan string, 4)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: got %v", err)
	}
	timer := make(chan time.Time, 1)
	timer <- time.Now()
	if err := s.acquire(context.Background(), "b", timer); !errors.Is(err, errHashBusy) {
		t.Fatalf("given up: got %v, want errHashBusy", err)
	}
	if s.waiting != 0 || len(s.queues) != 0 || len(s.turns) != 0 {
		t.Fatalf("after giving up: waiting %d, queues %v, turns %v", s.waiting, s.queues, s.turns)
	}
	// Granted as it gave up: the slot goes to the next request, not lost.
	c := &slotWaiter{ready: make(chan struct{})} // c's request, its wait ended by giveUp
	s.mu.Lock()
	s.queues["c"], s.turns, s.waiting = []*slotWaiter{c}, append(s.turns, "c"), s.waiting+1
	s.mu.Unlock()
	queueUp(t, s, "d", got)
	s.release() // to c, as it gives up
	if !c.granted {
		t.Fatal("the slot did not go to the first in line")
	}
	s.abandon("c", c)
	if r := <-got; r != "d" {
		t.Errorf("after c gave up its slot: %q got it, want d", r)
	}
	s.release()
	if s.busy != 0 || s.waiting != 0 {
		t.Errorf("at the end: busy %d, waiting %d; want 0 and 0", s.busy, s.waiting)
	}
}
