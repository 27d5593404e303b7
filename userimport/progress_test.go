package userimport_test

import (
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/passhash"
	"github.com/authsidecar/authsidecar/userimport"
)

// TestBar: the bar redraws one line in place, at most every BarInterval,
// with lines, lines/s, the share of the file and the time left; Clear
// leaves a clean line.
func TestBar(t *testing.T) {
	var out strings.Builder
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	b := userimport.NewBar(&out, 1000, func() time.Time { return now })
	now = now.Add(2 * time.Second)
	b.Update(userimport.Counts{Line: 20_000, Bytes: 250, Refused: 3})
	want := "\r\x1b[2K20,000 lines  10,000 lines/s  [######------------------]  25%  ETA 6s  3 refused"
	if out.String() != want {
		t.Errorf("first draw:\n got %q\nwant %q", out.String(), want)
	}
	now = now.Add(userimport.BarInterval / 2)
	b.Update(userimport.Counts{Line: 21_000, Bytes: 260})
	if out.String() != want {
		t.Errorf("a redraw within BarInterval: got %q", out.String())
	}
	b.Clear()
	if !strings.HasSuffix(out.String(), "\r\x1b[2K") {
		t.Errorf("Clear: got %q", out.String())
	}
	out.Reset()
	stdin := userimport.NewBar(&out, 0, func() time.Time { return now })
	now = now.Add(time.Second)
	stdin.Update(userimport.Counts{Line: 500})
	if got := out.String(); got != "\r\x1b[2K500 lines  500 lines/s" {
		t.Errorf("unknown size: got %q, want lines and lines/s only", got)
	}
}

// TestReport: the plain summary says what was done, the formats, and how
// to go on after a stop.
func TestReport(t *testing.T) {
	sum := userimport.Summary{Counts: userimport.Counts{Line: 1_000_002, Imported: 999_990, NoPassword: 12, Updated: 1, Skipped: 1, Refused: 10,
		Hashes: map[passhash.Format]int{passhash.Bcrypt: 900_000, passhash.PHPass: 99_978}, RolesGranted: 5}}
	var out strings.Builder
	sum.Report(&out, false, 61500*time.Millisecond)
	want := "imported 999,990 users (12 without a password hash), updated 1, skipped 1, refused 10; 1,000,002 lines read in 1m1.5s\n" +
		"password hashes written: bcrypt 900,000, phpass 99,978\n" +
		"roles granted: 5\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	sum = userimport.Summary{Counts: userimport.Counts{Line: 40, Imported: 30, Refused: 10}, Stopped: true, Unfinished: 31}
	out.Reset()
	sum.Report(&out, true, time.Second)
	want = "dry run: nothing was written; a real run would do what follows\n" +
		"would import 30 users, would update 0, would skip 0, refused 10; 40 lines read in 1s\n" +
		"stopped after line 40: 10 lines refused (-max-errors); the lines after it were not read: fix the file and run the import again with -on-conflict skip (the users written are skipped)\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// TestProgressCounts: after each batch, Progress gets the lines handled
// and the bytes of the file read so far, which the bar's share and time
// left are made of.
func TestProgressCounts(t *testing.T) {
	db := openStore(t)
	in := usersFile(30)
	var got []userimport.Counts
	r := importText(t, db, in, userimport.Options{BatchSize: 10, Progress: func(c userimport.Counts) { got = append(got, c) }})
	if r.err != nil || len(got) != 3 {
		t.Fatalf("got %v and %d progress calls, want 3", r, len(got))
	}
	for i, c := range got {
		if c.Line != 10*(i+1) || c.Imported != 10*(i+1) {
			t.Errorf("call %d: got line %d, %d imported; want %d", i, c.Line, c.Imported, 10*(i+1))
		}
		if i > 0 && c.Bytes <= got[i-1].Bytes {
			t.Errorf("call %d: %d bytes read, not more than before (%d)", i, c.Bytes, got[i-1].Bytes)
		}
	}
	if last := got[2].Bytes; last != int64(len(in)) {
		t.Errorf("last call: %d bytes read, want the whole file's %d", last, len(in))
	}
}
