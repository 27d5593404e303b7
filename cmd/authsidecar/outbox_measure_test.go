package main

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/mailtest"
	"github.com/authsidecar/authsidecar/internal/pgtest"
)

// quantile is the q-quantile of ds (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// TestOutboxMeasured measures the outbox on the binary, on SQLite and on
// PostgreSQL, and logs the numbers (for the closing note; wall-clock on a
// shared machine is never asserted, only that every message arrives):
//   - latency: one reset at a time, from request-password-reset answered
//     to the webhook received; the request's own round trip beside it;
//   - throughput: a backlog of resets queued while the receiver holds the
//     first delivery, then let go: messages delivered per second;
//   - request-password-reset for known and unknown addresses, interleaved:
//     the answers must not tell them apart.
func TestOutboxMeasured(t *testing.T) {
	const latencyN, burst, timingN = 200, 500, 300
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			secret := mailtest.NewWebhookSecret(t)
			recv := mailtest.NewWebhookReceiver(t, secret)
			// A long send timeout: the throughput run holds one send
			// while the backlog is queued.
			email := fmt.Sprintf("{ delivery: webhook, webhook: { url: %q, timeout: 30s } }", recv.URL)
			env := "EMAIL_WEBHOOK_SECRET=" + secret
			var p *process
			if store == "sqlite" {
				p, _, _ = mailBinary(t, t.TempDir(), email, env)
			} else {
				p = startReplicas(t, 1, pgtest.URL(t), echoUpstream(t).URL, "email: "+email, env)[0]
			}
			s := p.instance
			known := []string{"k0@example.com", "k1@example.com", "k2@example.com", "k3@example.com"}
			for _, k := range known {
				signUp(t, s, k, oldPassword)
			}
			// post times one request-password-reset; a 503 (intake full)
			// is retried after 5ms, counted, and not timed.
			client := &http.Client{Timeout: 10 * time.Second}
			busy := 0
			post := func(addr string) time.Duration {
				for {
					start := time.Now()
					res, err := client.Post(s.base+"/api/auth/request-password-reset", "application/json", strings.NewReader(fmt.Sprintf(`{"email":%q}`, addr)))
					if err != nil {
						t.Fatal(err)
					}
					bodyTo(io.Discard, res)
					took := time.Since(start)
					switch res.StatusCode {
					case 200:
						return took
					case http.StatusServiceUnavailable:
						busy++
						time.Sleep(5 * time.Millisecond)
					default:
						t.Fatalf("request-password-reset %s: got %d", addr, res.StatusCode)
					}
				}
			}

			var latency, roundTrip []time.Duration
			for i := range latencyN {
				roundTrip = append(roundTrip, post(known[i%len(known)]))
				answered := time.Now()
				if !recv.WaitDelivered(i+1, 10*time.Second) {
					t.Fatalf("message %d not delivered within 10s", i+1)
				}
				hs := recv.Requests()
				latency = append(latency, hs[len(hs)-1].At.Sub(answered))
			}
			t.Logf("MEASURE %s delivery latency (answered -> webhook received), %d messages one at a time: median %v, p95 %v, max %v; the request's own round trip: median %v",
				store, latencyN, quantile(latency, .5), quantile(latency, .95), quantile(latency, 1), quantile(roundTrip, .5))

			release := recv.Hold()
			defer release()
			start := time.Now()
			errs, burstBusy := postResets(burst, 8, func(int) string { return s.base }, func(i int) string { return known[i%len(known)] })
			for _, e := range errs {
				t.Error(e)
			}
			queuedIn := time.Since(start)
			waitUntil(t, "the burst queued", 30*time.Second, func() bool {
				return mailMetric(t, p, "authsidecar_mail_queued_total") >= latencyN+burst
			})
			let := time.Now()
			release()
			if !recv.WaitDelivered(latencyN+burst, 60*time.Second) {
				t.Fatalf("%d of %d messages delivered within 60s", recv.Delivered(), latencyN+burst)
			}
			var last time.Time
			for _, h := range recv.Requests() {
				if h.At.After(last) {
					last = h.At
				}
			}
			took := last.Sub(let)
			t.Logf("MEASURE %s throughput: %d resets queued in %v (%.0f requests/s from 8 clients, %d answers 503 intake-full retried); delivered in %v once the receiver let go: %.0f messages/s",
				store, burst, queuedIn.Round(time.Millisecond), burst/queuedIn.Seconds(), burstBusy, took.Round(time.Millisecond), burst/took.Seconds())

			// Delivery held for the timing run: the receiver runs in this
			// process, and webhooks arriving after known addresses only
			// would compete with the client being timed. What differs
			// between the two kinds, the lookup and the queueing behind
			// the answer, still runs.
			release = recv.Hold()
			busy = 0
			var knownT, unknownT []time.Duration
			// Known and unknown in the order K U U K: each kind follows
			// each kind as often, so what one request leaves running
			// behind its answer weighs on both alike.
			for i := range 2 * timingN {
				if i%4 == 0 || i%4 == 3 {
					knownT = append(knownT, post(known[i/2%len(known)]))
				} else {
					unknownT = append(unknownT, post(fmt.Sprintf("nobody%d@example.com", i)))
				}
			}
			// The noise floor, from the same run: the unknown samples in
			// two halves (alternate pairs, so each half has as many after
			// a known one as after an unknown one), compared likewise.
			var halfA, halfB []time.Duration
			for j, d := range unknownT {
				if j/2%2 == 0 {
					halfA = append(halfA, d)
				} else {
					halfB = append(halfB, d)
				}
			}
			ratio := func(a, b []time.Duration, q float64) float64 {
				return float64(quantile(a, q)) / float64(quantile(b, q))
			}
			t.Logf("MEASURE %s request-password-reset, %d known and %d unknown interleaved, one client: known median %v p90 %v; unknown median %v p90 %v; known/unknown median %.3f, p90 %.3f; noise floor (unknown/unknown, two halves) median %.3f, p90 %.3f (%d answers 503 intake-full retried)",
				store, timingN, timingN, quantile(knownT, .5), quantile(knownT, .9), quantile(unknownT, .5), quantile(unknownT, .9),
				ratio(knownT, unknownT, .5), ratio(knownT, unknownT, .9), ratio(halfA, halfB, .5), ratio(halfA, halfB, .9), busy)
			release()
			if !recv.WaitDelivered(latencyN+burst+timingN, 30*time.Second) {
				t.Errorf("%d of %d messages delivered within 30s", recv.Delivered(), latencyN+burst+timingN)
			}
			for id, hs := range recv.Deliveries() {
				if len(hs) != 1 {
					t.Errorf("webhook-id %s delivered %d times, want once", id, len(hs))
				}
			}
		})
	}
}
