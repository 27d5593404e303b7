package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/authsidecar/authsidecar/mail"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// queue issues n reset tokens for one user, message i created at
// t0+i seconds, and returns the messages as stored.
func queue(t *testing.T, db *sqlstore.DB, n int) []mail.Queued {
	t.Helper()
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	out := make([]mail.Queued, n)
	for i := range n {
		out[i] = issueToken(t, db, mail.PasswordReset, "u1", "ann@example.com", t0.Add(time.Duration(i)*time.Second), time.Hour).msg
	}
	return out
}

func ids(qs []mail.Queued) []string {
	out := []string{}
	for _, q := range qs {
		out = append(out, q.ID)
	}
	return out
}

// payloads counts the outbox rows that still hold a payload.
func payloads(t *testing.T, e env) int {
	t.Helper()
	return rawInt(t, e, `SELECT count(*) FROM outbox WHERE payload IS NOT NULL`)
}

func mustClaim(t *testing.T, db *sqlstore.DB, owner string, n int, lease time.Duration, now time.Time) []mail.Queued {
	t.Helper()
	got, err := db.ClaimOutbox(context.Background(), owner, n, lease, now)
	if err != nil {
		t.Fatalf("claim by %s at %v: %v", owner, now, err)
	}
	return got
}

// testOutboxClaimAckFail: a claim takes due rows oldest first, with their
// payload, and leases them; an ack marks the row delivered and deletes
// the payload; a failure counts the attempt and makes the row due again
// at next; a dead row loses its payload.
func testOutboxClaimAckFail(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	msgs := queue(t, db, 3)
	if got := mustClaim(t, db, "a", 0, time.Minute, t0.Add(time.Hour)); len(got) != 0 {
		t.Errorf("claim of 0: got %v, want none", ids(got))
	}
	// Not due before its creation (next_attempt_at = created_at).
	if got := mustClaim(t, db, "a", 10, time.Minute, t0.Add(-time.Millisecond)); len(got) != 0 {
		t.Errorf("claim before any is due: got %v, want none", ids(got))
	}
	now := t0.Add(time.Minute)
	got := mustClaim(t, db, "a", 2, time.Minute, now)
	wantClaimed := slices.Clone(msgs[:2])
	for i := range wantClaimed {
		wantClaimed[i].Attempts = 1 // the claim counts the attempt
	}
	if !reflect.DeepEqual(got, wantClaimed) {
		t.Fatalf("claim 2: got %+v, want the oldest two, at their first attempt %+v", got, wantClaimed)
	}
	if got := mustClaim(t, db, "b", 10, time.Minute, now); !reflect.DeepEqual(ids(got), ids(msgs[2:])) {
		t.Errorf("second claim: got %v, want only the unleased %v", ids(got), ids(msgs[2:]))
	}
	if got := mustClaim(t, db, "c", 10, time.Minute, now); len(got) != 0 {
		t.Errorf("third claim: got %v, want none (all leased)", ids(got))
	}

	if err := db.AckOutbox(ctx, msgs[0].ID, "a", now.Add(time.Second)); err != nil {
		t.Fatalf("ack: %v", err)
	}
	long := strings.Repeat("é", 600) // 1200 bytes
	if err := db.FailOutbox(ctx, msgs[1].ID, "a", now.Add(time.Hour), "421 try later\x00\xff"+long, false, now.Add(time.Second)); err != nil {
		t.Fatalf("fail: %v", err)
	}
	if err := db.FailOutbox(ctx, msgs[2].ID, "b", time.Time{}, "550 no such user", true, now.Add(2*time.Second)); err != nil {
		t.Fatalf("fail dead: %v", err)
	}
	list, err := db.ListOutbox(ctx, "")
	if err != nil || len(list) != 3 {
		t.Fatalf("list: got %+v %v, want 3 rows", list, err)
	}
	byID := map[string]mail.Queued{}
	for _, q := range list {
		byID[q.ID] = q
	}
	delivered := msgs[0]
	delivered.Sealed, delivered.State, delivered.Attempts, delivered.DeliveredAt = nil, "delivered", 1, now.Add(time.Second)
	dead := msgs[2]
	dead.Sealed, dead.State, dead.Attempts, dead.LastError, dead.NextAttemptAt = nil, "dead", 1, "550 no such user", now.Add(2*time.Second)
	for _, want := range []mail.Queued{delivered, dead} {
		if got := byID[want.ID]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s row: got %+v, want %+v", want.State, got, want)
		}
	}
	failed := byID[msgs[1].ID]
	if failed.State != "pending" || failed.Attempts != 1 || !failed.NextAttemptAt.Equal(now.Add(time.Hour)) {
		t.Errorf("failed row: got %+v, want pending, 1 attempt (its claim's), due in an hour", failed)
	}
	// last_error: NUL gone, invalid UTF-8 replaced, cut to 1000 bytes on
	// a character boundary; PostgreSQL would refuse it as given.
	if le := failed.LastError; !utf8.ValidString(le) || strings.ContainsRune(le, 0) || len(le) > 1000 || len(le) < 990 || !strings.HasPrefix(le, "421 try later\uFFFD") {
		t.Errorf("last_error: got %d bytes %q..., want valid UTF-8 without NUL, at most 1000 bytes", len(le), le[:min(len(le), 20)])
	}
	// Only the pending row keeps its payload.
	if n := payloads(t, e); n != 1 {
		t.Errorf("rows holding a payload: got %d, want 1 (the pending one)", n)
	}
	// The failed row is free again (its lease cleared), due at next.
	if got := mustClaim(t, db, "c", 10, time.Minute, now.Add(time.Hour-time.Millisecond)); len(got) != 0 {
		t.Errorf("claim before next: got %v, want none", ids(got))
	}
	got = mustClaim(t, db, "c", 10, time.Minute, now.Add(time.Hour))
	if len(got) != 1 || got[0].ID != msgs[1].ID || got[0].Attempts != 2 || !reflect.DeepEqual(got[0].Sealed, msgs[1].Sealed) {
		t.Errorf("claim at next: got %+v, want the failed row with its payload, at its second attempt", got)
	}
	if err := db.AckOutbox(ctx, msgs[1].ID, "c", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := payloads(t, e); n != 0 {
		t.Errorf("rows holding a payload after every row finished: got %d, want 0", n)
	}
	// A delivered or dead row is never claimed again, however late.
	if got := mustClaim(t, db, "d", 10, time.Minute, now.Add(48*time.Hour)); len(got) != 0 {
		t.Errorf("claim with nothing pending: got %v, want none", ids(got))
	}
	for _, bad := range []struct {
		owner string
		lease time.Duration
	}{{"", time.Minute}, {"a", 0}, {"a", -time.Second}} {
		if _, err := db.ClaimOutbox(ctx, bad.owner, 1, bad.lease, now); err == nil {
			t.Errorf("claim by %q for %v: got nil, want an error", bad.owner, bad.lease)
		}
	}
}

// testOutboxLease: a lease keeps other owners off until it expires, then
// another owner may claim the row, and the first owner's ack or failure
// is ErrLeaseLost and changes nothing.
func testOutboxLease(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	msgs := queue(t, db, 2)
	m := msgs[0]
	if got := mustClaim(t, db, "a", 1, 30*time.Second, t0); len(got) != 1 || got[0].ID != m.ID {
		t.Fatalf("claim: got %v, want %s", ids(got), m.ID)
	}
	if got := mustClaim(t, db, "b", 1, 30*time.Second, t0.Add(30*time.Second-time.Millisecond)); len(got) != 1 || got[0].ID != msgs[1].ID {
		t.Fatalf("claim within a's lease: got %v, want only the other row", ids(got))
	}
	if got := mustClaim(t, db, "b", 1, 30*time.Second, t0.Add(30*time.Second)); len(got) != 1 || got[0].ID != m.ID {
		t.Fatalf("claim at the lease's end: got %v, want %s", ids(got), m.ID)
	}
	before := mustExport(t, db).Outbox
	later := t0.Add(31 * time.Second)
	lost := []struct {
		name string
		do   func() error
	}{
		{"ack by the old owner", func() error { return db.AckOutbox(ctx, m.ID, "a", later) }},
		{"fail by the old owner", func() error { return db.FailOutbox(ctx, m.ID, "a", later, "x", false, later) }},
		{"dead by the old owner", func() error { return db.FailOutbox(ctx, m.ID, "a", later, "x", true, later) }},
		{"ack by a stranger", func() error { return db.AckOutbox(ctx, m.ID, "z", later) }},
		{"ack of an unknown row", func() error { return db.AckOutbox(ctx, "msg_nope", "b", later) }},
		{"fail of an unknown row", func() error { return db.FailOutbox(ctx, "msg_nope", "b", later, "x", false, later) }},
	}
	for _, tt := range lost {
		if err := tt.do(); !errors.Is(err, mail.ErrLeaseLost) {
			t.Errorf("%s: got %v, want ErrLeaseLost", tt.name, err)
		}
	}
	if after := mustExport(t, db).Outbox; !reflect.DeepEqual(after, before) {
		t.Errorf("lost-lease calls changed the outbox:\ngot  %+v\nwant %+v", after, before)
	}
	if err := db.AckOutbox(ctx, m.ID, "b", later); err != nil {
		t.Fatalf("ack by the owner: %v", err)
	}
	if err := db.AckOutbox(ctx, m.ID, "b", later); !errors.Is(err, mail.ErrLeaseLost) {
		t.Errorf("second ack: got %v, want ErrLeaseLost", err)
	}
	if err := db.FailOutbox(ctx, m.ID, "b", later, "x", false, later); !errors.Is(err, mail.ErrLeaseLost) {
		t.Errorf("fail after ack: got %v, want ErrLeaseLost", err)
	}
	// An owner whose lease ran out, with nobody claiming since, may still
	// acknowledge: the message went, and the ack keeps it from going again.
	other := msgs[1] // b's since t0+30s-1ms, for 30s
	if err := db.AckOutbox(ctx, other.ID, "b", t0.Add(2*time.Minute)); err != nil {
		t.Errorf("ack after the lease ran out, unclaimed since: got %v, want nil", err)
	}
	if n := payloads(t, e); n != 0 {
		t.Errorf("rows holding a payload: got %d, want 0", n)
	}
}

// testOutboxClaimExactlyOnce: claimers on two handles (two replicas) and
// several goroutines each claim at once until nothing is left: every row
// is claimed by exactly one of them, and no claim fails.
func testOutboxClaimExactlyOnce(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	const rows, claimers, batch = 120, 8, 4
	msgs := queue(t, db, rows)
	handles := []*sqlstore.DB{db, e.replica(t)}
	now := t0.Add(time.Hour)
	claimed := make([][]string, claimers)
	errs := make([]error, claimers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range claimers {
		wg.Go(func() {
			<-start
			h, owner := handles[i%2], fmt.Sprint("replica", i%2, "-worker", i)
			for {
				got, err := h.ClaimOutbox(ctx, owner, batch, time.Hour, now)
				if err != nil {
					errs[i] = err
					return
				}
				if len(got) == 0 {
					return
				}
				for _, q := range got {
					claimed[i] = append(claimed[i], q.ID)
					// Half the rows are acknowledged at once; the rest
					// stay leased, which must keep them just as claimed.
					if len(claimed[i])%2 == 0 {
						if err := h.AckOutbox(ctx, q.ID, owner, now); err != nil {
							errs[i] = err
							return
						}
					}
				}
			}
		})
	}
	close(start)
	wg.Wait()
	seen := map[string][]int{}
	for i, got := range claimed {
		if errs[i] != nil {
			t.Errorf("claimer %d: %v", i, errs[i])
		}
		for _, id := range got {
			seen[id] = append(seen[id], i)
		}
	}
	for _, m := range msgs {
		if by := seen[m.ID]; len(by) != 1 {
			t.Errorf("row %s claimed by %v, want exactly one claimer", m.ID, by)
		}
	}
	if len(seen) != rows {
		t.Errorf("got %d rows claimed, want %d", len(seen), rows)
	}
	busy := 0
	for _, got := range claimed {
		if len(got) > 0 {
			busy++
		}
	}
	t.Logf("%d rows over %d claimers (%d claimed any)", rows, claimers, busy)
}

// testOldestPending: the creation time of the oldest pending row, whatever
// its lease; none when every row is delivered or dead.
func testOldestPending(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	check := func(want time.Time, wantOK bool) {
		t.Helper()
		got, ok, err := db.OldestPending(ctx)
		if err != nil || ok != wantOK || !got.Equal(want) {
			t.Errorf("OldestPending: got %v %v %v, want %v %v", got, ok, err, want, wantOK)
		}
	}
	check(time.Time{}, false)
	msgs := queue(t, db, 3) // created at t0, t0+1s, t0+2s
	check(t0, true)
	mustClaim(t, db, "a", 3, time.Minute, t0.Add(time.Hour))
	check(t0, true) // leased is still undelivered
	if err := db.AckOutbox(ctx, msgs[0].ID, "a", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	check(t0.Add(time.Second), true)
	if err := db.FailOutbox(ctx, msgs[1].ID, "a", time.Time{}, "x", true, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	check(t0.Add(2*time.Second), true)
	if err := db.FailOutbox(ctx, msgs[2].ID, "a", t0.Add(2*time.Hour), "x", false, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	check(t0.Add(2*time.Second), true) // failing is not delivering
	mustClaim(t, db, "a", 3, time.Minute, t0.Add(2*time.Hour))
	if err := db.AckOutbox(ctx, msgs[2].ID, "a", t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	check(time.Time{}, false)
}

// testListOutbox: newest first, filtered by state, never with a payload.
func testListOutbox(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	msgs := queue(t, db, 4)
	mustClaim(t, db, "a", 4, time.Minute, t0.Add(time.Hour))
	if err := db.AckOutbox(ctx, msgs[0].ID, "a", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := db.FailOutbox(ctx, msgs[1].ID, "a", time.Time{}, "x", true, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		state string
		want  []string
	}{
		{"", []string{msgs[3].ID, msgs[2].ID, msgs[1].ID, msgs[0].ID}},
		{"pending", []string{msgs[3].ID, msgs[2].ID}},
		{"delivered", []string{msgs[0].ID}},
		{"dead", []string{msgs[1].ID}},
	}
	for _, tt := range tests {
		got, err := db.ListOutbox(ctx, tt.state)
		if err != nil || !reflect.DeepEqual(ids(got), tt.want) {
			t.Errorf("ListOutbox(%q): got %v %v, want %v", tt.state, ids(got), err, tt.want)
		}
		for _, q := range got {
			if q.Sealed != nil {
				t.Errorf("ListOutbox(%q): %s listed with its payload", tt.state, q.ID)
			}
		}
	}
	for _, bad := range []string{"Pending", "all", "pending'--", " "} {
		if got, err := db.ListOutbox(ctx, bad); err == nil {
			t.Errorf("ListOutbox(%q): got %v, want an error", bad, ids(got))
		}
	}
}

// testRetryOutbox: a pending row is made due now with no attempts; a
// dead or delivered row, whose payload is gone, is not (false), and stays
// as it was.
// testReleaseOutbox: a released row is claimable at once by anyone, with
// no attempt counted and its payload and user kept; only its owner may
// release it, and only while it is pending.
func testReleaseOutbox(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	msgs := queue(t, db, 2)
	now := t0.Add(time.Hour)
	got := mustClaim(t, db, "a", 2, time.Minute, now)
	if len(got) != 2 || got[0].UserID != "u1" {
		t.Fatalf("claimed %+v, want both rows with their user", got)
	}
	if err := db.ReleaseOutbox(ctx, msgs[0].ID, "b"); !errors.Is(err, mail.ErrLeaseLost) {
		t.Errorf("release by a stranger: %v, want ErrLeaseLost", err)
	}
	if err := db.ReleaseOutbox(ctx, msgs[0].ID, "a"); err != nil {
		t.Fatalf("release: %v", err)
	}
	// Within a's lease, b claims the released row and only that one.
	again := mustClaim(t, db, "b", 2, time.Minute, now.Add(time.Second))
	if len(again) != 1 || again[0].ID != msgs[0].ID || again[0].Attempts != 1 || len(again[0].Sealed) == 0 {
		t.Fatalf("after release: claimed %+v, want the released row with its payload, this claim its first attempt (the released one not counted)", again)
	}
	if err := db.AckOutbox(ctx, msgs[1].ID, "a", now); err != nil {
		t.Fatal(err)
	}
	if err := db.ReleaseOutbox(ctx, msgs[1].ID, "a"); !errors.Is(err, mail.ErrLeaseLost) {
		t.Errorf("release of a delivered row: %v, want ErrLeaseLost", err)
	}
}

func testRetryOutbox(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	msgs := queue(t, db, 3)
	now := t0.Add(time.Hour)
	mustClaim(t, db, "a", 3, time.Minute, now)
	if err := db.FailOutbox(ctx, msgs[0].ID, "a", now.Add(24*time.Hour), "timeout", false, now); err != nil {
		t.Fatal(err)
	}
	if err := db.FailOutbox(ctx, msgs[1].ID, "a", time.Time{}, "550", true, now); err != nil {
		t.Fatal(err)
	}
	if err := db.AckOutbox(ctx, msgs[2].ID, "a", now); err != nil {
		t.Fatal(err)
	}
	before := mustExport(t, db).Outbox
	for _, id := range []string{msgs[1].ID, msgs[2].ID, "msg_nope"} {
		if ok, err := db.RetryOutbox(ctx, id, now); err != nil || ok {
			t.Errorf("RetryOutbox(%s): got %v %v, want false", id, ok, err)
		}
	}
	if after := mustExport(t, db).Outbox; !reflect.DeepEqual(after, before) {
		t.Errorf("refused retries changed the outbox:\ngot  %+v\nwant %+v", after, before)
	}
	retryAt := now.Add(time.Minute)
	if ok, err := db.RetryOutbox(ctx, msgs[0].ID, retryAt); err != nil || !ok {
		t.Fatalf("RetryOutbox of a pending row: got %v %v, want true", ok, err)
	}
	got := mustClaim(t, db, "b", 10, time.Minute, retryAt)
	want := msgs[0]
	want.NextAttemptAt, want.LastError, want.Attempts = retryAt, "timeout", 1
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("claim after retry: got %+v, want [%+v] (attempts counted afresh, due now)", got, want)
	}
}

// testOutboxSweep: delivered rows go a week after delivery, dead rows a
// month after death, pending rows never; one claim in 256 sweeps.
func testOutboxSweep(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	const day = 24 * time.Hour
	now := t0
	msgs := queue(t, db, 6) // created at t0..t0+5s; claimed, finished in the past
	for i, m := range msgs {
		// Rows are finished back in time: make them due then.
		rawExec(t, e, `UPDATE outbox SET created_at = ?, next_attempt_at = ? WHERE id = ?`,
			now.Add(-100*day+time.Duration(i)*time.Second).UnixMilli(), now.Add(-100*day).UnixMilli(), m.ID)
	}
	mustClaim(t, db, "a", 6, time.Hour, now.Add(-100*day))
	finish := []struct {
		at    time.Duration // before now
		dead  bool
		swept bool
	}{
		{7*day + time.Millisecond, false, true},
		{7 * day, false, false},
		{6 * day, false, false},
		{30*day + time.Millisecond, true, true},
		{30 * day, true, false},
	}
	for i, f := range finish {
		var err error
		if f.dead {
			err = db.FailOutbox(ctx, msgs[i].ID, "a", time.Time{}, "x", true, now.Add(-f.at))
		} else {
			err = db.AckOutbox(ctx, msgs[i].ID, "a", now.Add(-f.at))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// msgs[5] stays pending, 100 days old.
	n, err := db.SweepOutbox(ctx, now)
	if err != nil || n != 2 {
		t.Errorf("SweepOutbox: got %d %v, want 2", n, err)
	}
	left := map[string]bool{}
	list, _ := db.ListOutbox(ctx, "")
	for _, q := range list {
		left[q.ID] = true
	}
	for i, f := range finish {
		if left[msgs[i].ID] == f.swept {
			t.Errorf("row finished %v ago (dead %v): still there %v, want swept %v", f.at, f.dead, left[msgs[i].ID], f.swept)
		}
	}
	if !left[msgs[5].ID] {
		t.Error("the 100-day-old pending row was swept")
	}

	// The periodic sweep, by a fresh handle's 256th claim.
	r := e.replica(t)
	for i := 1; i < 256; i++ {
		mustClaim(t, r, "b", 1, time.Minute, now.Add(12*time.Hour))
	}
	if got := rawInt(t, e, `SELECT count(*) FROM outbox WHERE id = ?`, msgs[1].ID); got != 1 {
		t.Fatal("a row went before the 256th claim")
	}
	mustClaim(t, r, "b", 1, time.Minute, now.Add(12*time.Hour))
	// Half a day on: the delivery of exactly 7 days ago and the death of
	// exactly 30 days ago have aged past their keep; the delivery of 6
	// days ago and the pending row stay.
	for i, wantLeft := range []int{0, 0, 1, 0, 0, 1} {
		if got := rawInt(t, e, `SELECT count(*) FROM outbox WHERE id = ?`, msgs[i].ID); got != wantLeft {
			t.Errorf("after 256 claims half a day on: row %d: got %d, want %d", i, got, wantLeft)
		}
	}
}
