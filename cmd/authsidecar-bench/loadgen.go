package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// kind is what a request was, for error counts and expected statuses.
type kind uint8

const (
	kindBusiness kind = iota // GET /api/tasks, Bearer: 200
	kindSession              // get-session, cookie: 200 with set-auth-jwt
	kindSignIn               // sign-in/email: 200
	kindUpgrade              // WebSocket handshake: 101
	numKinds
)

var kindNames = [numKinds]string{"business", "get-session", "sign-in", "websocket"}

// Bounds on one request: connecting, and everything after the window
// closes (a request started before the end may finish up to this late).
const (
	dialTimeout    = 5 * time.Second
	requestTimeout = 15 * time.Second
)

// generator writes a worker's next request into w.req and says its kind.
type generator func(w *worker) kind

// loadSpec is one stretch of load against one target.
type loadSpec struct {
	addr     string        // 127.0.0.1:PORT
	conns    int           // workers, one connection each
	duration time.Duration // no request starts after it
	next     generator
	// tunnel: every request is a new connection that ends after the
	// response head (WebSocket handshakes); otherwise keep-alive.
	tunnel bool
	// wantJWT: a get-session answer must carry set-auth-jwt (the bare
	// proxy's upstream sends none).
	wantJWT bool
}

// loadResult sums a stretch of load.
type loadResult struct {
	elapsed  time.Duration // from the start to the last response
	ok, errs [numKinds]uint64
	hist     histogram
	firstErr string // the first error seen, to say what went wrong
}

func (r *loadResult) totalOK() (n uint64) {
	for _, v := range r.ok {
		n += v
	}
	return n
}

func (r *loadResult) totalErrs() (n uint64) {
	for _, v := range r.errs {
		n += v
	}
	return n
}

// worker is one connection's request loop. Everything it touches per
// request is preallocated: the request buffer, the reader, the histogram.
type worker struct {
	addr string
	rng  uint64
	req  []byte
	br   *bufio.Reader
	hist histogram
	ok   [numKinds]uint64
	errs [numKinds]uint64
	err  error // first error

	mu      sync.Mutex // guards conn and aborted against abort
	conn    net.Conn
	aborted bool
}

// rand is xorshift64*: cheap, per worker, no locking.
func (w *worker) rand() uint64 {
	x := w.rng
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	w.rng = x
	return x * 2685821657736338717
}

// intn is a number in [0, n), n > 0.
func (w *worker) intn(n int) int { return int(w.rand() % uint64(n)) }

var errAborted = errors.New("aborted")

func (w *worker) dial(hardEnd time.Time) error {
	c, err := net.DialTimeout("tcp", w.addr, dialTimeout)
	if err != nil {
		return err
	}
	c.SetDeadline(hardEnd)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.aborted {
		c.Close()
		return errAborted
	}
	w.conn = c
	w.br.Reset(c)
	return nil
}

func (w *worker) closeConn() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn != nil {
		w.conn.Close()
		w.conn = nil
	}
}

// abort makes any blocked read or write return at once.
func (w *worker) abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.aborted = true
	if w.conn != nil {
		w.conn.SetDeadline(time.Unix(1, 0))
	}
}

// roundTrip sends w.req on the keep-alive connection (dialing if there is
// none) and reads the response.
func (w *worker) roundTrip(hardEnd time.Time, tunnel bool) (response, error) {
	if w.conn == nil {
		if err := w.dial(hardEnd); err != nil {
			return response{}, err
		}
	}
	if _, err := w.conn.Write(w.req); err != nil {
		w.closeConn()
		return response{}, err
	}
	resp, err := readResponse(w.br, nil)
	if err != nil || resp.close || tunnel || resp.status == 101 {
		w.closeConn()
	}
	return resp, err
}

func expected(k kind, r response, wantJWT bool) bool {
	switch k {
	case kindUpgrade:
		return r.status == 101
	case kindSession:
		return r.status == 200 && (r.jwt || !wantJWT)
	default:
		return r.status == 200
	}
}

// loop sends requests until end (no request starts later) or stop.
func (w *worker) loop(s *loadSpec, end, hardEnd time.Time, stop *atomic.Bool) {
	for !stop.Load() {
		start := time.Now()
		if !start.Before(end) {
			return
		}
		k := s.next(w)
		resp, err := w.roundTrip(hardEnd, s.tunnel)
		lat := time.Since(start)
		if stop.Load() {
			return // aborted mid-request: not the target's error
		}
		if err == nil && !expected(k, resp, s.wantJWT) {
			err = fmt.Errorf("%s: status %d (set-auth-jwt present: %t)", kindNames[k], resp.status, resp.jwt)
		}
		if err != nil {
			w.errs[k]++
			if w.err == nil {
				w.err = fmt.Errorf("%s: %w", kindNames[k], err)
			}
			if w.conn == nil {
				time.Sleep(10 * time.Millisecond) // no hot loop against a dead target
			}
			continue
		}
		w.ok[k]++
		w.hist.record(lat)
	}
}

// probe is called just before the workers start and just after the last
// one finished, before connections close: the CPU window.
type probe struct{ start, stop func() }

// runLoad drives one stretch of load: every connection is opened first,
// then all workers start together.
func runLoad(ctx context.Context, s loadSpec, p probe) (*loadResult, error) {
	workers := make([]*worker, s.conns)
	var stop atomic.Bool
	for i := range workers {
		workers[i] = &worker{addr: s.addr, rng: uint64(i)*0x9E3779B97F4A7C15 + 1, req: make([]byte, 0, 4096), br: bufio.NewReaderSize(nil, 16<<10)}
	}
	abort := context.AfterFunc(ctx, func() {
		stop.Store(true)
		for _, w := range workers {
			w.abort()
		}
	})
	defer abort()
	defer func() {
		for _, w := range workers {
			w.closeConn()
		}
	}()
	// Connect before the clock starts (far deadline; loop shortens it).
	if !s.tunnel {
		far := time.Now().Add(s.duration + requestTimeout + dialTimeout)
		for _, w := range workers {
			if err := w.dial(far); err != nil {
				return nil, fmt.Errorf("connect %s: %w", s.addr, err)
			}
		}
	}
	if p.start != nil {
		p.start()
	}
	begin := time.Now()
	end := begin.Add(s.duration)
	hardEnd := end.Add(requestTimeout)
	for _, w := range workers {
		if w.conn != nil {
			w.conn.SetDeadline(hardEnd)
		}
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() { w.loop(&s, end, hardEnd, &stop) })
	}
	wg.Wait()
	elapsed := time.Since(begin)
	if p.stop != nil {
		p.stop()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &loadResult{elapsed: elapsed}
	for _, w := range workers {
		r.hist.merge(&w.hist)
		for k := range numKinds {
			r.ok[k] += w.ok[k]
			r.errs[k] += w.errs[k]
		}
		if r.firstErr == "" && w.err != nil {
			r.firstErr = w.err.Error()
		}
	}
	return r, nil
}
