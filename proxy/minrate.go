package proxy

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// A client that sends its request body, or takes the answer, slowly
// holds what a fast one frees at once: an upstream slot (upstream.go),
// goroutines, buffers. A bound on the whole transfer cuts large honest
// uploads; a bound on each silence alone lets one byte every few seconds
// hold a request for ever. A minimum rate bounds both, as Apache's
// mod_reqtimeout MinRate does.

// Close reasons of a request the sidecar ended because its client was
// too slow (RequestInfo.CloseReason, the access log's close_reason, and
// the authsidecar_slow_clients_total label).
const (
	// CloseReasonSlowBody: the request's body came below the minimum
	// rate; the answer is 408 and the connection is closed.
	CloseReasonSlowBody = "slow_body"
	// CloseReasonSlowRead: the client took the answer below the minimum
	// rate; the connection was closed in the middle of it.
	CloseReasonSlowRead = "slow_read"
)

// Defaults of Options.BodyMinRate and Options.BodyRateGrace.
const (
	DefaultBodyMinRate   = 1024 // bytes per second
	DefaultBodyRateGrace = 10 * time.Second
)

// pace measures one direction of one request against a minimum rate. It
// holds a credit of time, which starts at grace and never exceeds it.
// Time spent waiting for the client (inside a read of its body, inside a
// write of the answer to it) is taken from the credit; each byte the
// client sends or takes gives 1/rate back. The client is too slow when
// the credit runs out. Put otherwise: over every stretch of time spent
// waiting for it, the client moves at least rate × (stretch − grace)
// bytes; so it may pause for the grace at most (as long as it has kept
// the rate before), and holding a request for T costs it
// rate × (T − grace) bytes at least, however fast it sent before.
//
// Time spent waiting for the upstream (to take the body, or to produce
// more of the answer: an event stream between events) is never counted:
// a stalled upstream or a quiet stream is not the client's doing.
//
// A read counts its bytes when they have come. A write counts its bytes
// as it starts, since they cannot be seen leaving one by one: it may last
// the credit plus the time its own bytes earn, so a client taking the
// answer at exactly the rate is not cut in the middle of a write (and
// answerWriter writes no more at once than the grace earns).
type pace struct {
	rate   int64 // bytes per second
	grace  time.Duration
	credit time.Duration
}

func newPace(rate int64, grace time.Duration) pace {
	return pace{rate: rate, grace: grace, credit: grace}
}

// earned is the time n bytes give back.
func (p *pace) earned(n int) time.Duration {
	return time.Duration(int64(n) * int64(time.Second) / p.rate)
}

// deadline is when an operation starting at now, moving n bytes it knows
// in advance (0 for a read), must have ended.
func (p *pace) deadline(now time.Time, n int) time.Time {
	return now.Add(p.credit + p.earned(n))
}

// spend records an operation that waited for the client for waited and
// moved n bytes.
func (p *pace) spend(waited time.Duration, n int) {
	p.credit = min(p.grace, p.credit-waited+p.earned(n))
}

// errSlowBody ends a request body that came below the minimum rate.
var errSlowBody = errors.New("proxy: request body below the minimum rate")

// slowBody is a forwarded request's body read under a pace: before each
// read, the connection's read deadline is set to when the credit would
// run out; a read that meets it ends the body with errSlowBody (and the
// server then cancels the request's context, which ends the upstream
// exchange and frees its slot at once).
//
// net/http clears the read deadline itself when the body reaches its end,
// as it starts reading the connection for the next request; no deadline
// is set after that, as it would end that background read and with it
// the request's context.
type slowBody struct {
	rc io.ReadCloser
	// ctl sets the connection's read deadline (an
	// *http.ResponseController); nil once it could not.
	ctl  interface{ SetReadDeadline(time.Time) error }
	pace pace
	err  error // what ended the body, returned ever after
	// tripped is read by the handler, while the Transport's goroutine
	// may be reading the body.
	tripped atomic.Bool
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.ctl == nil {
		return b.rc.Read(p)
	}
	start := time.Now()
	if b.ctl.SetReadDeadline(b.pace.deadline(start, 0)) != nil {
		// Not a connection net/http serves (a test recorder): nothing
		// to bound.
		b.ctl = nil
		return b.rc.Read(p)
	}
	n, err := b.rc.Read(p)
	b.pace.spend(time.Since(start), n)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			b.tripped.Store(true)
			err = errSlowBody
		}
		b.err = err
	}
	return n, err
}

func (b *slowBody) Close() error { return b.rc.Close() }

// answerWriter writes the answer's body to the client, under a pace while
// the upstream's body is open: before each write, the connection's write
// deadline is set to when the credit would run out (counting the write's
// own bytes), so a client that does not take them in time fails the
// write, and the connection is closed. No write is larger than what the
// grace earns (piece), so a client that stops taking the answer is cut
// within twice the grace.
type answerWriter struct {
	w      http.ResponseWriter
	ctl    http.ResponseController
	stream bool // flush after every write
	pace   pace
	piece  int  // the most bytes one timed write carries
	paced  bool // writes are timed
	timed  bool // a deadline was set: end clears it
	slow   bool // a write failed at its deadline
}

// minPiece keeps timed writes large enough to pass net/http's buffers
// straight to the connection.
const minPiece = 4 << 10

func newAnswerWriter(w http.ResponseWriter, stream bool, rate int64, grace time.Duration) answerWriter {
	a := answerWriter{w: w, ctl: *http.NewResponseController(w), stream: stream}
	if rate > 0 {
		a.pace, a.paced = newPace(rate, grace), true
		a.piece = int(max(minPiece, min(rate*int64(grace/time.Millisecond)/1000, 1<<30)))
	}
	return a
}

// write writes b; free says the upstream's body is closed already, so
// the write holds no connection and is not timed.
func (a *answerWriter) write(b []byte, free bool) error {
	if !a.paced || free {
		// A deadline set for an earlier write may have passed since.
		a.end()
		return a.send(b, true)
	}
	for len(b) > 0 {
		piece := b[:min(len(b), a.piece)]
		b = b[len(piece):]
		start := time.Now()
		if a.ctl.SetWriteDeadline(a.pace.deadline(start, len(piece))) != nil {
			// Not a connection net/http serves: nothing to bound.
			a.paced = false
			if err := a.send(piece, len(b) == 0); err != nil || len(b) == 0 {
				return err
			}
			return a.send(b, true)
		}
		a.timed = true
		err := a.send(piece, len(b) == 0)
		a.pace.spend(time.Since(start), len(piece))
		if err != nil {
			a.slow = errors.Is(err, os.ErrDeadlineExceeded)
			return err
		}
	}
	return nil
}

// send writes b, and flushes a stream after the last bytes of a read.
func (a *answerWriter) send(b []byte, last bool) error {
	n, err := a.w.Write(b)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err == nil && last && a.stream {
		if ferr := a.ctl.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
			err = ferr
		}
	}
	return err
}

// end clears the write deadline: net/http sets none of its own on a
// server without a WriteTimeout, so one left would cut the next answer
// on the connection.
func (a *answerWriter) end() {
	if a.timed {
		a.ctl.SetWriteDeadline(time.Time{})
		a.timed = false
	}
}
