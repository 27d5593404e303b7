package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/mail"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// testOutboxClaimCountsAttempt: a claim is an attempt. A row whose
// claimer never reports back (killed mid-send, again and again) shows one
// more attempt at each claim, so the worker can give it up after
// email.max_attempts; a failure reported by the claimer does not count it
// twice; a release (not tried) takes the claim's count back.
func testOutboxClaimCountsAttempt(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	msgs := queue(t, db, 2)
	now := t0.Add(time.Hour)
	for want := 1; want <= 3; want++ {
		got := mustClaim(t, db, "crashing", 1, time.Minute, now)
		if len(got) != 1 || got[0].ID != msgs[0].ID || got[0].Attempts != want {
			t.Fatalf("claim %d without an outcome before: got %+v, want %s at %d attempts", want, got, msgs[0].ID, want)
		}
		now = now.Add(time.Minute) // the lease ends: its owner is gone
	}
	if got := attemptsByID(mustClaim(t, db, "b", 2, time.Minute, now)); got[msgs[0].ID] != 4 || got[msgs[1].ID] != 1 {
		t.Fatalf("claim after the crashes: got attempts %v, want both rows, at 4 and 1", got)
	}
	if err := db.FailOutbox(ctx, msgs[0].ID, "b", now, "421 later", false, now); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, db, msgs[0].ID); got.Attempts != 4 || got.LastError != "421 later" {
		t.Errorf("after a reported failure: got %d attempts, %q; want 4 (the claim counted it)", got.Attempts, got.LastError)
	}
	if err := db.ReleaseOutbox(ctx, msgs[1].ID, "b"); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, db, msgs[1].ID); got.Attempts != 0 {
		t.Errorf("after a release: got %d attempts, want 0 (not tried)", got.Attempts)
	}
	if got := attemptsByID(mustClaim(t, db, "c", 2, time.Minute, now)); got[msgs[0].ID] != 5 || got[msgs[1].ID] != 1 {
		t.Fatalf("claim after a failure and a release: got attempts %v, want 5 and 1", got)
	}
	if err := db.AckOutbox(ctx, msgs[0].ID, "c", now); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, db, msgs[0].ID); got.Attempts != 5 || got.State != "delivered" {
		t.Errorf("delivered at its fifth claim: got %d attempts, state %s; want 5, delivered", got.Attempts, got.State)
	}
}

// testOutboxRenew: RenewOutbox moves the lease of every row owner holds,
// and only those: a live worker keeps its rows past the first lease; once
// it stops renewing (killed), its rows are free one lease after the last
// renewal, not later.
func testOutboxRenew(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	msgs := queue(t, db, 3)
	const lease = 10 * time.Second
	now := t0.Add(time.Hour)
	mustClaim(t, db, "a", 2, lease, now)
	mustClaim(t, db, "b", 1, time.Millisecond, now) // b's lease ends at once: c's to claim
	if err := db.AckOutbox(ctx, msgs[1].ID, "a", now); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		at := now.Add(time.Duration(i) * lease / 2)
		n, err := db.RenewOutbox(ctx, "a", at.Add(lease))
		if err != nil || n != 1 {
			t.Fatalf("renewal %d: got %d rows, %v; want a's one pending row", i, n, err)
		}
		if got := mustClaim(t, db, "c", 10, lease, at); len(got) != 1 || got[0].ID != msgs[2].ID {
			t.Fatalf("claim at %v while a renews: got %v, want only b's expired row %s", at.Sub(now), ids(got), msgs[2].ID)
		}
		if err := db.ReleaseOutbox(ctx, msgs[2].ID, "c"); err != nil {
			t.Fatal(err)
		}
	}
	last := now.Add(5 * lease / 2)
	if got := mustClaim(t, db, "c", 10, lease, last.Add(lease-time.Millisecond)); len(got) != 1 || got[0].ID != msgs[2].ID {
		t.Fatalf("claim just before the last renewal's lease ends: got %v, want only %s", ids(got), msgs[2].ID)
	}
	if got := mustClaim(t, db, "d", 10, lease, last.Add(lease)); len(got) != 1 || got[0].ID != msgs[0].ID {
		t.Fatalf("claim once a stopped renewing: got %v, want its row %s", ids(got), msgs[0].ID)
	}
	if n, err := db.RenewOutbox(ctx, "a", last.Add(2*lease)); err != nil || n != 0 {
		t.Errorf("renewal by the owner that lost its rows: got %d, %v; want 0", n, err)
	}
	if _, err := db.RenewOutbox(ctx, "", last); err == nil {
		t.Error("renewal without an owner: got nil, want an error")
	}
}

func attemptsByID(qs []mail.Queued) map[string]int {
	out := map[string]int{}
	for _, q := range qs {
		out[q.ID] = q.Attempts
	}
	return out
}

// listed is the row id as ListOutbox shows it.
func listed(t *testing.T, db *sqlstore.DB, id string) mail.Queued {
	t.Helper()
	all, err := db.ListOutbox(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range all {
		if q.ID == id {
			return q
		}
	}
	t.Fatalf("row %s not listed", id)
	return mail.Queued{}
}
