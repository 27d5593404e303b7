package revocation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// ClientOptions configures NewClient.
type ClientOptions struct {
	// URL is the issuer's feed (keys.revocations_url). Required.
	URL string
	// HTTPClient sends the requests; it must not follow redirects (the
	// sidecar's follows none, as the JWKS fetch). Zero: one on a clone of
	// http.DefaultTransport that follows none.
	HTTPClient *http.Client
	// Keys looks up the issuer's signing keys. Required.
	Keys KeyLookup
	// Issuer is the feed answers' expected iss (the JWT issuer). Required.
	Issuer string
	// Set is filled. Required.
	Set *Set
	// StaleIfError is how long after the last answer the set still judges
	// tokens while the feed fails; past it Check returns ErrUnavailable
	// until an answer comes (keys.revocations_stale_if_error). Zero: 5m.
	StaleIfError time.Duration
	// Wait is the long-poll wait asked; the issuer answers as soon as a
	// revocation comes, and by its own deadline at the latest. Zero: 25s.
	Wait time.Duration
	// Metrics counts what is read. Zero: not counted.
	Metrics *Metrics
	// Logger; zero: slog.Default(). Now; zero: time.Now.
	Logger *slog.Logger
	Now    func() time.Time
}

// Client keeps a verifier's Set current from the issuer's feed: a full
// sync first (Check refuses every token until it is in: the set is not
// known to be complete), then long polls from the cursor it ended at. A
// failed request is retried with backoff, from 1s to 8s; while the last
// answer is younger than StaleIfError the set keeps judging tokens with
// what it holds, past it every check is ErrUnavailable (503 upstream of
// here), never a token let through unjudged.
type Client struct {
	o      ClientOptions
	cursor string
	// pending collects a full sync's pages until its last one.
	pending []Entry
	syncing bool

	// mu orders the set's usable marks: the staleness watcher's and an
	// answer's.
	mu      sync.Mutex
	synced  bool // a full sync has completed
	lastOK  time.Time
	retryAt time.Time
}

// Retry backoff bounds.
const (
	minBackoff = time.Second
	maxBackoff = 8 * time.Second
)

// NewClient checks o and returns a client; Run drives it.
func NewClient(o ClientOptions) (*Client, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("revocations url %q: want an absolute http or https URL without credentials", o.URL)
	}
	if o.Keys == nil || o.Set == nil || o.Issuer == "" {
		return nil, errors.New("revocation client: Keys, Set and Issuer are required")
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{
			Transport:     http.DefaultTransport.(*http.Transport).Clone(),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if o.StaleIfError <= 0 {
		o.StaleIfError = 5 * time.Minute
	}
	if o.Wait <= 0 {
		o.Wait = 25 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Client{o: o, lastOK: o.Now()}, nil
}

// Run reads the feed until ctx ends.
func (c *Client) Run(ctx context.Context) {
	done := make(chan struct{})
	defer func() { <-done }()
	go func() {
		defer close(done)
		c.watchStale(ctx)
	}()
	backoff, failing := time.Duration(0), false
	for ctx.Err() == nil {
		wait := c.o.Wait
		if c.syncing || !c.isSynced() {
			wait = 0 // pages of a full sync come back to back
		}
		err := c.step(ctx, wait)
		if err == nil {
			if failing {
				c.o.Logger.Info("revocation feed answers again", "url", c.o.URL)
			}
			backoff, failing = 0, false
			continue
		}
		if ctx.Err() != nil {
			return
		}
		c.o.Metrics.failed()
		if !failing {
			c.o.Logger.Warn("revocation feed failed: the revocations held stay in force until keys.revocations_stale_if_error, then business requests get 503",
				"url", c.o.URL, "error", err.Error())
		}
		failing = true
		backoff = min(max(2*backoff, minBackoff), maxBackoff)
		// Drawn from the upper half, so verifiers started together do not
		// retry in step.
		d := backoff/2 + rand.N(backoff/2+1)
		c.mu.Lock()
		c.retryAt = c.o.Now().Add(d)
		c.mu.Unlock()
		c.judgeStale()
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (c *Client) isSynced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.synced
}

// watchStale judges staleness every second, whatever the requests are
// doing: one may hang until its timeout. It also drops from the set, once
// a minute on this process's clock, the entries no token can need any
// more, as a full sidecar's poller does: the issuer's feed sends no word
// of them.
func (c *Client) watchStale(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	lastSweep := c.o.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.judgeStale()
		}
		if now := c.o.Now(); now.Sub(lastSweep) >= setSweepEvery {
			lastSweep = now
			c.o.Set.Sweep()
		}
	}
}

// judgeStale makes the set refuse to judge once the last answer is older
// than StaleIfError.
func (c *Client) judgeStale() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.o.Now()
	if !c.synced {
		c.o.Set.MarkUnusable(&UnavailableError{Why: "no complete read of the issuer's revocations yet", RetryIn: c.retryAt.Sub(now)})
		return
	}
	if age := now.Sub(c.lastOK); age > c.o.StaleIfError {
		c.o.Set.MarkUnusable(&UnavailableError{
			Why:     fmt.Sprintf("the issuer's revocation feed has not answered for %s (keys.revocations_stale_if_error %s)", age.Round(time.Second), c.o.StaleIfError),
			RetryIn: c.retryAt.Sub(now),
		})
	}
}

// step makes one request and applies its answer.
func (c *Client) step(ctx context.Context, wait time.Duration) error {
	q := url.Values{"since": {c.cursor}, "wait": {strconv.Itoa(int(wait / time.Second))}}
	u, _ := url.Parse(c.o.URL)
	u.RawQuery = q.Encode()
	rctx, cancel := context.WithTimeout(ctx, wait+10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/jwt")
	res, err := c.o.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer+1))
	switch {
	case err != nil:
		return fmt.Errorf("read answer: %w", err)
	case res.StatusCode != http.StatusOK:
		return fmt.Errorf("answered %d", res.StatusCode)
	case len(body) > maxAnswer:
		return fmt.Errorf("answer larger than %d bytes", maxAnswer)
	}
	p, err := openAnswer(ctx, c.o.Keys, body, c.o.Issuer, c.cursor, c.o.Now())
	if err != nil {
		return err
	}
	return c.apply(p)
}

// maxAnswer bounds an answer: a page is about 600 KiB.
const maxAnswer = 4 << 20

// apply takes a checked answer into the set.
func (c *Client) apply(p feedPayload) error {
	sess, err := decodePairs(p.Sessions, KindSession)
	if err != nil {
		return err
	}
	users, err := decodePairs(p.Users, KindUser)
	if err != nil {
		return err
	}
	es := append(sess, users...)
	if p.All > 0 {
		es = append(es, Entry{Kind: KindAll, At: p.All})
	}
	c.o.Metrics.receivedEntries(es)
	switch {
	case p.Reset:
		c.syncing, c.pending = true, es
	case c.syncing:
		c.pending = append(c.pending, es...)
	default:
		c.o.Set.Add(es...)
	}
	c.cursor = p.Cursor
	if !p.Complete {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.syncing {
		c.o.Set.Replace(c.pending)
		c.syncing, c.pending = false, nil
		if !c.synced {
			c.o.Logger.Info("revocations synced from the issuer's feed", "url", c.o.URL, "held", c.o.Set.Len(), "cursor", c.cursor)
		}
		c.synced = true
	}
	if c.synced {
		now := c.o.Now()
		c.lastOK = now
		c.o.Metrics.synced(now)
		c.o.Set.MarkUsable()
	}
	return nil
}
