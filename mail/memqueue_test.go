package mail

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// memQueue is an in-memory Queue with the semantics the design fixes for
// the stores (claim with a lease, ack and fail only by the lease holder).
// The store-backed worker tests live with the stores.
type memQueue struct {
	mu   sync.Mutex
	rows map[string]*memRow

	acks, fails int
	releases    int
	renewals    int
	renewErr    error // what RenewOutbox answers, when set
	failCalls   []failCall
}

type memRow struct {
	Queued
	owner      string
	leaseUntil time.Time
}

type failCall struct {
	id, lastErr string
	next, now   time.Time
	dead        bool
	attempts    int // the row's attempts at the call (its claim's included)
}

func newMemQueue() *memQueue { return &memQueue{rows: map[string]*memRow{}} }

// add seals m into a new pending row created at now and returns its id.
func (q *memQueue) add(t testing.TB, b *Box, m Message, now time.Time) string {
	t.Helper()
	id := NewID()
	sealed, err := b.Seal(id, m)
	if err != nil {
		t.Fatal(err)
	}
	q.addRaw(Queued{ID: id, Kind: m.Kind, Sealed: sealed, State: StatePending, CreatedAt: now, NextAttemptAt: now})
	return id
}

func (q *memQueue) addRaw(r Queued) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rows[r.ID] = &memRow{Queued: r}
}

func (q *memQueue) row(id string) memRow {
	q.mu.Lock()
	defer q.mu.Unlock()
	return *q.rows[id]
}

// steal gives the row's lease to another owner, as a replica would after
// our lease expired.
func (q *memQueue) steal(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rows[id].owner = "another-replica"
}

func (q *memQueue) counts() (acks, fails int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.acks, q.fails
}

func (q *memQueue) failHistory() []failCall {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.failCalls)
}

func (q *memQueue) ClaimOutbox(ctx context.Context, owner string, n int, lease time.Duration, now time.Time) ([]Queued, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var due []*memRow
	for _, r := range q.rows {
		if r.State == StatePending && !r.NextAttemptAt.After(now) && (r.owner == "" || !r.leaseUntil.After(now)) {
			due = append(due, r)
		}
	}
	slices.SortFunc(due, func(a, b *memRow) int { return a.NextAttemptAt.Compare(b.NextAttemptAt) })
	var out []Queued
	for _, r := range due[:min(n, len(due))] {
		r.owner, r.leaseUntil = owner, now.Add(lease)
		r.Attempts++ // the claim is the attempt
		c := r.Queued
		c.Sealed = slices.Clone(r.Sealed)
		out = append(out, c)
	}
	return out, nil
}

func (q *memQueue) AckOutbox(ctx context.Context, id, owner string, now time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := q.rows[id]
	if r == nil || r.owner != owner || r.State != StatePending {
		return ErrLeaseLost
	}
	q.acks++
	r.State, r.Sealed, r.DeliveredAt, r.owner = StateDelivered, nil, now, ""
	return nil
}

func (q *memQueue) FailOutbox(ctx context.Context, id, owner string, next time.Time, lastErr string, dead bool, now time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := q.rows[id]
	if r == nil || r.owner != owner || r.State != StatePending {
		return ErrLeaseLost
	}
	q.fails++
	q.failCalls = append(q.failCalls, failCall{id: id, lastErr: lastErr, next: next, now: now, dead: dead, attempts: r.Attempts})
	r.LastError, r.NextAttemptAt, r.owner = lastErr, next, ""
	if dead {
		r.State, r.Sealed = StateDead, nil
	}
	return nil
}

func (q *memQueue) ReleaseOutbox(ctx context.Context, id, owner string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := q.rows[id]
	if r == nil || r.owner != owner || r.State != StatePending {
		return ErrLeaseLost
	}
	q.releases++
	r.owner = ""
	r.Attempts = max(r.Attempts-1, 0)
	return nil
}

func (q *memQueue) RenewOutbox(ctx context.Context, owner string, until time.Time) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.renewErr != nil {
		return 0, q.renewErr
	}
	q.renewals++
	n := 0
	for _, r := range q.rows {
		if r.owner == owner && r.State == StatePending {
			r.leaseUntil = until
			n++
		}
	}
	return n, nil
}

func (q *memQueue) renewCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.renewals
}

// setRenewErr makes RenewOutbox fail with err (nil: succeed again).
func (q *memQueue) setRenewErr(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.renewErr = err
}

// crashClaim claims like a worker that dies before any outcome: the
// rows stay leased to a gone owner until the lease ends.
func (q *memQueue) crashClaim(t testing.TB, n int, lease time.Duration, now time.Time) []Queued {
	t.Helper()
	got, err := q.ClaimOutbox(context.Background(), "killed-process", n, lease, now)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (q *memQueue) OldestPending(ctx context.Context) (time.Time, bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var oldest time.Time
	ok := false
	for _, r := range q.rows {
		if r.State == StatePending && (!ok || r.CreatedAt.Before(oldest)) {
			oldest, ok = r.CreatedAt, true
		}
	}
	return oldest, ok, nil
}
