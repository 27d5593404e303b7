package revocation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// What a feed answer costs, and what bounds it. Anyone may ask the feed
// (verifiers hold no credential), and a full-sync page is about 570 KiB
// built, encoded and signed: 3-5 ms of CPU in process (BenchmarkFeedPage),
// 5-14 ms through the binary with 100,000 revocations held. Three things
// keep that bounded whatever the askers send:
//
//   - Only real positions are built (wire.go, build): a cursor has one
//     spelling, and one naming no real position gets a small redirect.
//   - An answer that cost a build is kept, signed, for the rest of its
//     second, and askers of a since whose build is under way wait for it
//     (a flight): N verifiers asking the same page cost one build.
//   - Builds are paid from a budget shared by every asker, a token bucket
//     of buildsPerSecond and buildBurst; past it the answer is 503
//     FEED_BUSY with Retry-After. What is never charged: small news (at
//     most freeEntries revocations: a long poll's answer, so a verifier
//     that is in sync never waits on the budget) and redirects.

// The budget: buildsPerSecond page builds a second, buildBurst at once.
// At 5-14 ms a page this bounds the feed to 4-11% of one core, sustained,
// whatever the askers send. A verifier's full sync of 100,000
// revocations is 6 pages and of a million about 50: the burst takes most
// of one at once (the rest comes at the rate, the verifier retrying with
// its backoff), and verifiers that start together share their pages.
const (
	buildsPerSecond = 8
	buildBurst      = 32
	// freeEntries is the most revocations news may hold and not be
	// charged: a poll interval's worth on a busy issuer.
	freeEntries = 1000
)

// maxSignedPages bounds the answers kept for one second. The budget
// bounds the builds of a second to fewer, so askers cannot push the
// answers others share out of it.
const maxSignedPages = 256

// The answers, as the metric labels them.
const (
	answerBuilt   = "built"   // built and signed for this request
	answerShared  = "shared"  // kept from this second, or built for another asker of the same since at the same time
	answerRefused = "refused" // over the budget: 503 FEED_BUSY
)

// busyError: the budget is spent; retry after retry.
type busyError struct{ retry time.Duration }

func (e *busyError) Error() string {
	return fmt.Sprintf("page build budget spent; retry in %v", e.retry)
}

type signedPage struct {
	head int64
	tok  string
}

// flight is a build under way for one since; the askers of the same since
// wait for it and share its answer.
type flight struct {
	done chan struct{}
	tok  string
	err  error
}

// answer returns the signed answer to since (parsed as cur) as this
// process can give it now: kept from this second, the one a build under
// way for the same since makes, or a new one. ctx ends a wait for
// another asker's build.
func (f *Feed) answer(ctx context.Context, since string, cur cursor) (string, error) {
	sec := f.o.Now().Unix()
	f.mu.Lock()
	if tok, ok := f.keptLocked(since, sec); ok {
		f.mu.Unlock()
		f.o.Metrics.fed(nil, answerShared)
		return tok, nil
	}
	if fl := f.flights[since]; fl != nil {
		f.mu.Unlock()
		select {
		case <-fl.done:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		f.o.Metrics.fed(fl.err, answerShared)
		return fl.tok, fl.err
	}
	fl := &flight{done: make(chan struct{}), err: errAbandoned}
	f.flights[since] = fl
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.flights, since)
		f.mu.Unlock()
		close(fl.done)
	}()
	fl.tok, fl.err = f.sign(since, cur)
	f.o.Metrics.fed(fl.err, answerBuilt)
	return fl.tok, fl.err
}

// errAbandoned is what the askers waiting for a build get if it never
// ends (a panic, which the server's recovery answers for its own asker).
var errAbandoned = errors.New("feed answer: build abandoned")

// sign builds and signs the answer to since, and keeps it for the rest
// of its second if it cost a build.
func (f *Feed) sign(since string, cur cursor) (string, error) {
	p, charged, err := f.build(cur)
	if err != nil {
		return "", err
	}
	now := f.o.Now()
	p.Iss, p.Aud, p.Iat, p.Exp, p.Since = f.o.Issuer, feedAudience, now.Unix(), now.Unix()+feedLifetime, since
	body, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("feed answer: %w", err)
	}
	tok, err := f.o.Sign(FeedType, body)
	if err != nil {
		return "", fmt.Errorf("feed answer: %w", err)
	}
	if charged {
		f.keepPage(since, now.Unix(), tok)
	}
	return tok, nil
}

// charge takes one page build from the budget, or says when one will be
// there.
func (f *Feed) charge() error {
	now := f.o.Now()
	r := f.budget.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return &busyError{retry: d}
	}
	return nil
}

// cachedPage returns the signed answer for since kept from second sec, if
// it was built at the head there is now or a later one.
func (f *Feed) cachedPage(since string, sec int64) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keptLocked(since, sec)
}

// keptLocked is cachedPage with f.mu held.
func (f *Feed) keptLocked(since string, sec int64) (string, bool) {
	if f.signedSec != sec {
		return "", false
	}
	sp, ok := f.signed[since]
	if !ok || sp.head < f.head {
		return "", false
	}
	return sp.tok, true
}

// keepPage remembers a signed answer for the rest of sec.
func (f *Feed) keepPage(since string, sec int64, tok string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.signedSec != sec || len(f.signed) >= maxSignedPages {
		f.signed, f.signedSec = map[string]signedPage{}, sec
	}
	f.signed[since] = signedPage{head: f.head, tok: tok}
}
