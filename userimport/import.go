package userimport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/passhash"
)

// Options says how Run imports.
type Options struct {
	Format     Format
	OnConflict Conflict
	// DryRun checks every line, against the store too, and writes
	// nothing.
	DryRun bool
	// MaxErrors stops the import once that many lines were refused: at
	// the line that makes that many, or, when the store refused lines of
	// a batch, once the batch is written. No line after it is read.
	// Zero: never.
	MaxErrors int
	// AllowWeakHashes accepts the weak hash formats (unsalted or salted
	// MD5, SHA-1, SHA-256). Zero: they are refused.
	AllowWeakHashes bool
	// BatchSize is how many lines make one batch, one transaction of the
	// store. Zero: DefaultBatchSize.
	BatchSize int
	// Refused is called with each refused line, in the order of the file.
	// Zero: not called.
	Refused func(line int, reason string)
	// Progress is called after each batch with the counts so far. Zero:
	// not called.
	Progress func(Counts)
	// Now is the clock: the created_at of lines without one, and the
	// instant written as updated_at. Zero: time.Now.
	Now func() time.Time
}

// DefaultBatchSize is the lines of one batch, one transaction. Larger
// batches write each index page fewer times (on SQLite a million users
// took 60 s in batches of 10,000, twice that in batches of 1,000); a
// batch costs a few MiB of memory and is what an interruption loses (a
// re-run with OnConflict Skip writes it).
const DefaultBatchSize = 10_000

// Counts are an import's numbers so far.
type Counts struct {
	// Line is the number of the last line handled; Bytes how many bytes
	// of the file were read.
	Line  int
	Bytes int64
	// Imported, Updated, Skipped and Refused count lines by outcome (in
	// a dry run: what a real run would do).
	Imported, Updated, Skipped, Refused int
	// NoPassword counts the users imported without a password hash.
	NoPassword int
	// Hashes counts the password hashes written (imported and updated),
	// by format.
	Hashes map[passhash.Format]int
	// RolesGranted counts the roles granted that were not held already.
	RolesGranted int
}

// Summary is how an import ended.
type Summary struct {
	Counts
	// Stopped says MaxErrors lines were refused: the import read nothing
	// after Line.
	Stopped bool
	// Unfinished, when not zero, is the first line of the batch an error
	// or an interruption cut short: from it on, lines may not have been
	// written. Run again with OnConflict Skip to import them: the lines
	// that were are then skipped.
	Unfinished int
}

// Run imports the users of r into st, one batch at a time.
func Run(ctx context.Context, r io.Reader, st Store, o Options) (Summary, error) {
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	im := &run{
		o:     o,
		st:    st,
		seen:  newSeen(),
		check: checker{now: o.Now().UTC().Truncate(time.Millisecond), hashes: passhash.Options{AllowWeak: o.AllowWeakHashes}, newID: issuer.NewUserID},
	}
	im.sum.Hashes = map[passhash.Format]int{}
	var src source
	switch o.Format {
	case CSV:
		s, err := newCSV(r)
		if err != nil {
			return im.sum, err
		}
		src = s
	default:
		src = newJSONL(r)
	}
	im.src = src
	err := im.read(ctx)
	im.sum.Bytes = src.offset()
	return im.sum, err
}

// run is one import under way.
type run struct {
	o     Options
	st    Store
	src   source
	seen  *seen
	check checker
	sum   Summary
	// The batch being read: its records, its refused lines, its lines.
	batch   []Record
	refused []refusal
	lines   int
	first   int // the batch's first line
}

type refusal struct {
	line   int
	reason string
}

func (im *run) read(ctx context.Context) error {
	var l rawLine
	for {
		if err := ctx.Err(); err != nil {
			return im.cut(fmt.Errorf("interrupted: %w", err))
		}
		err := im.src.next(&l)
		var le *lineError
		switch {
		case errors.Is(err, io.EOF):
			return im.flush(ctx)
		case errors.As(err, &le):
			im.take(le.line)
			im.refuse(le.line, le.reason)
		case err != nil:
			// What was read before stands: write it, then stop.
			if ferr := im.flush(ctx); ferr != nil {
				return ferr
			}
			return err
		default:
			im.take(l.line)
			im.add(&l)
		}
		if im.lines >= im.o.BatchSize {
			if err := im.flush(ctx); err != nil {
				return err
			}
		}
		// Refused lines are counted as they are read, and the store's
		// as their batch is written: either may reach MaxErrors.
		if im.o.MaxErrors > 0 && im.sum.Refused+len(im.refused) >= im.o.MaxErrors {
			im.sum.Stopped = true
			return im.flush(ctx)
		}
	}
}

// take counts line into the batch.
func (im *run) take(line int) {
	if im.lines == 0 {
		im.first = line
	}
	im.lines++
	im.sum.Line = line
}

func (im *run) refuse(line int, reason string) {
	im.refused = append(im.refused, refusal{line, reason})
}

// add checks a line and, if valid and new in the file, adds its record.
func (im *run) add(l *rawLine) {
	rec, reason := im.check.record(l)
	if reason != "" {
		im.refuse(l.line, reason)
		return
	}
	// A refused line reserves nothing: its id and email are kept only
	// once both are new.
	id, email := im.seen.key(kindID, rec.ID), im.seen.key(kindEmail, rec.Email)
	if !rec.GeneratedID && im.seen.has(id) {
		im.refuse(rec.Line, fmt.Sprintf("id %s repeats an earlier line's", rec.ID))
		return
	}
	if im.seen.has(email) {
		im.refuse(rec.Line, fmt.Sprintf("email %s repeats an earlier line's", rec.Email))
		return
	}
	if !rec.GeneratedID {
		im.seen.add(id)
	}
	im.seen.add(email)
	im.batch = append(im.batch, rec)
}

// flush writes the batch, then reports its lines in the file's order.
func (im *run) flush(ctx context.Context) error {
	if im.lines == 0 {
		return nil
	}
	var res BatchResult
	if len(im.batch) > 0 {
		var err error
		res, err = im.st.ImportUsers(ctx, im.batch, BatchOptions{OnConflict: im.o.OnConflict, DryRun: im.o.DryRun, Now: im.check.now})
		if err == nil && len(res.Outcomes) != len(im.batch) {
			err = fmt.Errorf("the store reported %d outcomes for %d lines", len(res.Outcomes), len(im.batch))
		}
		if err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("interrupted: %w", ctx.Err())
			}
			return im.cut(err)
		}
	}
	for i, out := range res.Outcomes {
		rec := &im.batch[i]
		switch out.Action {
		case Imported:
			im.sum.Imported++
			if rec.PasswordHash == "" {
				im.sum.NoPassword++
			}
		case Updated:
			im.sum.Updated++
		case Skipped:
			im.sum.Skipped++
		case Refused:
			im.refuse(rec.Line, out.Reason)
		}
		if rec.PasswordHash != "" && (out.Action == Imported || out.Action == Updated) {
			im.sum.Hashes[rec.HashFormat]++
		}
	}
	im.sum.RolesGranted += res.RolesGranted
	im.report()
	im.batch, im.lines = im.batch[:0], 0
	im.sum.Bytes = im.src.offset()
	if im.o.Progress != nil {
		im.o.Progress(im.sum.Counts)
	}
	return nil
}

// report counts and reports the batch's refused lines, in line order.
func (im *run) report() {
	slices.SortStableFunc(im.refused, func(a, b refusal) int { return a.line - b.line })
	for _, r := range im.refused {
		im.sum.Refused++
		if im.o.Refused != nil {
			im.o.Refused(r.line, r.reason)
		}
	}
	im.refused = im.refused[:0]
}

// cut ends the import with err: the batch under way was not written. Its
// refused lines are still reported.
func (im *run) cut(err error) error {
	if im.lines > 0 {
		im.sum.Unfinished = im.first
		im.report()
	}
	return err
}
