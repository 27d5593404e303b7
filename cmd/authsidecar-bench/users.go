package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// benchPassword is every benchmark user's password, also the one the seed
// command hashes.
const benchPassword = "bench-password-0123"

// cookieName is the session cookie of a sidecar on http (the default
// auth.cookie_name, no "__Secure-" prefix).
const cookieName = "auth.session_token"

// setupConcurrency is how many sign-ups or sign-ins run at once: scrypt
// runs GOMAXPROCS hashes at a time in the sidecar, so a few more keep it
// busy without queueing for long.
const setupConcurrency = 4

// newSetupClient is the net/http client for sign-ups and sign-ins during
// setup, never used inside a measured window.
func newSetupClient() *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: dialTimeout}).DialContext,
			MaxIdleConns:        64,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}

func email(i int) string { return "user" + strconv.Itoa(i) + "@example.com" }

// authCall POSTs a JSON body to an /api/auth endpoint and returns the
// session cookie it set, as "name=value".
func authCall(ctx context.Context, c *http.Client, base, path string, body any) (string, error) {
	cookie, err := postJSON(ctx, c, base, path, body)
	if err == nil && cookie == "" {
		err = fmt.Errorf("POST %s: no %s cookie", path, cookieName)
	}
	return cookie, err
}

// postJSON POSTs a JSON body and returns the session cookie the answer
// set ("" if none); anything but 200 is an error.
func postJSON(ctx context.Context, c *http.Client, base, path string, body any) (string, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, bytes.TrimSpace(msg))
	}
	for _, ck := range resp.Cookies() {
		if ck.Name == cookieName && ck.Value != "" {
			return ck.Name + "=" + ck.Value, nil
		}
	}
	return "", nil
}

func signUp(ctx context.Context, c *http.Client, base string, i int) (string, error) {
	return authCall(ctx, c, base, "/api/auth/sign-up/email",
		map[string]string{"name": "Bench User " + strconv.Itoa(i), "email": email(i), "password": benchPassword})
}

func signIn(ctx context.Context, c *http.Client, base string, i int) (string, error) {
	return authCall(ctx, c, base, "/api/auth/sign-in/email",
		map[string]string{"email": email(i), "password": benchPassword})
}

// forEach runs fn(i) for i in [0, n) on `workers` goroutines and stops at
// the first error or when ctx ends.
func forEach(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// prepareUsers signs up n users (or, on a database seeded with `seeded`
// users, signs in n of them spread over it) and returns their cookies.
func prepareUsers(ctx context.Context, c *http.Client, base string, n, seeded int) ([]string, error) {
	cookies := make([]string, n)
	err := forEach(ctx, n, setupConcurrency, func(ctx context.Context, i int) error {
		var err error
		if seeded > 0 {
			cookies[i], err = signIn(ctx, c, base, int(int64(i)*int64(seeded)/int64(n)))
		} else {
			cookies[i], err = signUp(ctx, c, base, i)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return cookies, nil
}

// jwtFetchers is how many connections fetch JWTs at once.
const jwtFetchers = 4

// fetchJWTs calls get-session want times, round-robin over the cookies,
// and returns the JWTs (each new, with its own jti), stopping early after
// maxTime. It speaks raw HTTP/1.1 like the load generator: fetching tens of
// thousands of tokens through net/http would cost seconds of shared CPU.
func fetchJWTs(ctx context.Context, addr string, cookies []string, want int, maxTime time.Duration) ([]string, error) {
	bounded, cancel := context.WithTimeout(ctx, maxTime)
	defer cancel()
	tokens := make([]string, want)
	var next atomic.Int64
	err := forEach(bounded, jwtFetchers, jwtFetchers, func(bctx context.Context, _ int) error {
		w := &worker{addr: addr, req: make([]byte, 0, 1024), br: bufio.NewReaderSize(nil, 16<<10)}
		defer w.closeConn()
		stop := context.AfterFunc(bctx, w.abort)
		defer stop()
		hardEnd := time.Now().Add(maxTime + requestTimeout)
		var jwt []byte
		for bctx.Err() == nil {
			i := int(next.Add(1) - 1)
			if i >= want {
				return nil
			}
			w.req = appendSession(w.req, addr, cookies[i%len(cookies)])
			jwt = jwt[:0]
			if w.conn == nil {
				if err := w.dial(hardEnd); err != nil {
					return err
				}
			}
			if _, err := w.conn.Write(w.req); err != nil {
				return err
			}
			resp, err := readResponse(w.br, &jwt)
			if err != nil {
				return err
			}
			if resp.status != http.StatusOK || len(jwt) == 0 {
				return fmt.Errorf("get-session: status %d, set-auth-jwt present: %t", resp.status, len(jwt) > 0)
			}
			if resp.close {
				w.closeConn()
			}
			tokens[i] = string(jwt)
		}
		return nil
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err != nil && bounded.Err() == nil {
		return nil, err
	}
	out := tokens[:0]
	for _, t := range tokens {
		if t != "" {
			out = append(out, t)
		}
	}
	return out, nil
}
