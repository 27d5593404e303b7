package userimport_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/authsidecar/authsidecar/userimport"
)

// usersFile is n lines: every third without an id, and the lines in bad
// (by number, from 1) with an invalid email.
func usersFile(n int, bad ...int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		email := fmt.Sprintf("user%d@example.com", i)
		for _, x := range bad {
			if x == i {
				email = "not-an-address"
			}
		}
		if i%3 == 0 {
			fmt.Fprintf(&b, "{\"email\":%q,\"roles\":[\"r\"]}\n", email)
		} else {
			fmt.Fprintf(&b, "{\"id\":%d,\"email\":%q,\"password_hash\":%q,\"roles\":[\"r\"]}\n", i, email, bcryptHash)
		}
	}
	return b.String()
}

// wantOnce checks that the store holds exactly want users, each once,
// each with its role.
func wantOnce(t *testing.T, st *store, want int) {
	t.Helper()
	ctx := context.Background()
	snap, err := st.db.Export(ctx)
	if err != nil {
		t.Fatal(err)
	}
	emails := map[string]int{}
	for _, u := range snap.Users {
		emails[u.Email]++
	}
	if len(snap.Users) != want || len(emails) != want || len(snap.Roles) != want {
		t.Errorf("got %d users, %d emails, %d roles; want %d of each", len(snap.Users), len(emails), len(snap.Roles), want)
	}
}

// TestStopThenRerun: -max-errors stops the import early; the same file
// run again with skip imports the rest, each user once.
func TestStopThenRerun(t *testing.T) {
	st := &store{db: openStore(t)}
	in := usersFile(50, 10, 20, 30, 40)
	r := importText(t, st.db, in, userimport.Options{MaxErrors: 2, BatchSize: 5})
	if r.err != nil || !r.sum.Stopped || r.sum.Line != 20 || r.sum.Imported != 18 || r.sum.Refused != 2 {
		t.Fatalf("first run: got %v stopped %t, want a stop at line 20 with 18 imported, 2 refused", r, r.sum.Stopped)
	}
	wantOnce(t, st, 18)
	r = importText(t, st.db, in, userimport.Options{OnConflict: userimport.Skip, BatchSize: 5})
	if r.err != nil || r.sum.Stopped || r.sum.Imported != 28 || r.sum.Skipped != 18 || r.sum.Refused != 4 {
		t.Fatalf("re-run: got %v, want 28 imported, 18 skipped, 4 refused", r)
	}
	wantOnce(t, st, 46)
}

// interrupting cancels the import's context as its nth batch reaches the
// store: Ctrl-C while a batch is being written.
type interrupting struct {
	userimport.Store
	n      int
	cancel context.CancelFunc
}

func (s *interrupting) ImportUsers(ctx context.Context, batch []userimport.Record, o userimport.BatchOptions) (userimport.BatchResult, error) {
	if s.n--; s.n == 0 {
		s.cancel()
	}
	return s.Store.ImportUsers(ctx, batch, o)
}

// TestInterruptThenRerun: an import interrupted while it writes a batch
// leaves whole batches and says where to go on from; run again with
// skip, it imports the rest, each user once (those without an id in the
// file too: their email finds them).
func TestInterruptThenRerun(t *testing.T) {
	st := &store{db: openStore(t)}
	in := usersFile(50)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sum, err := userimport.Run(ctx, strings.NewReader(in), &interrupting{Store: st.db, n: 3, cancel: cancel}, userimport.Options{BatchSize: 10})
	if !errors.Is(err, context.Canceled) || sum.Imported != 20 || sum.Unfinished != 21 {
		t.Fatalf("interrupted run: got %+v, %v; want 20 imported, unfinished from line 21, context.Canceled", sum, err)
	}
	wantOnce(t, st, 20)
	r := importText(t, st.db, in, userimport.Options{OnConflict: userimport.Skip, BatchSize: 10})
	if r.err != nil || r.sum.Imported != 30 || r.sum.Skipped != 20 || r.sum.Refused != 0 {
		t.Fatalf("re-run: got %v, want 30 imported, 20 skipped", r)
	}
	wantOnce(t, st, 50)
	// Once more: nothing left to import, nothing doubled.
	r = importText(t, st.db, in, userimport.Options{OnConflict: userimport.Skip, BatchSize: 7})
	if r.err != nil || r.sum.Imported != 0 || r.sum.Skipped != 50 {
		t.Fatalf("third run: got %v, want all 50 skipped", r)
	}
	wantOnce(t, st, 50)
}

// TestStopOnStoreRefusals: lines the store refuses count toward
// -max-errors when their batch is written, and the import reads no line
// after that batch.
func TestStopOnStoreRefusals(t *testing.T) {
	st := &store{db: openStore(t)}
	in := usersFile(20)
	if r := importText(t, st.db, usersFile(4), userimport.Options{}); r.sum.Imported != 4 {
		t.Fatalf("setup: got %v", r)
	}
	r := importText(t, st.db, in, userimport.Options{MaxErrors: 3, BatchSize: 10})
	if r.err != nil || !r.sum.Stopped || r.sum.Line != 10 || r.sum.Refused != 4 || r.sum.Imported != 6 {
		t.Fatalf("got %v stopped %t, want a stop after line 10: 4 refused, 6 imported", r, r.sum.Stopped)
	}
	wantOnce(t, st, 10)
}
