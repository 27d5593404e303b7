package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Revocation in the benchmark (docs/revocation.md): scenario a-rev1m is
// a's hot path on a sidecar whose database holds a million revocations
// (loaded into memory before it serves), against the same bare proxy; and
// time-to-effect (r) measures, with no load, how long a sign-out takes to
// be refused by the sidecar that wrote it and by a verifier reading its
// feed.

// heldRevocations is how many revocations a-rev1m holds (smoke: fewer,
// said in a note).
func (b *bench) heldRevocations() int {
	if b.o.Smoke {
		return 10_000
	}
	return 1_000_000
}

// seedRevocations inserts n revocations into the SQLite database at path,
// spread over the last 29 days, nine in ten of sessions and one in ten
// user cutoffs, none of the benchmark's own users.
func seedRevocations(ctx context.Context, path string, n int) error {
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer raw.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	now := time.Now().UnixMilli()
	for done := 0; done < n; done += seedBatch {
		tx, err := raw.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO revocation (kind, subject, at) VALUES (?, ?, ?)`)
		if err != nil {
			tx.Rollback()
			return err
		}
		for i := done; i < min(n, done+seedBatch); i++ {
			kind := "session"
			if i%10 == 0 {
				kind = "user"
			}
			if _, err := stmt.ExecContext(ctx, kind, randomID(rng), now-rng.Int64N(29*24*3600*1000)); err != nil {
				tx.Rollback()
				return fmt.Errorf("seed revocations: %w", err)
			}
		}
		stmt.Close()
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// clearRevocations deletes every revocation from the database at path:
// the scenarios after a-rev1m hold none.
func clearRevocations(ctx context.Context, path string) error {
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer raw.Close()
	_, err = raw.ExecContext(ctx, `DELETE FROM revocation`)
	return err
}

// effectReport is what time-to-effect measured.
type effectReport struct {
	Trials      int     `json:"trials"`
	SelfMedian  float64 `json:"self_median_ms"` // the sidecar that signed the session out
	SelfMax     float64 `json:"self_max_ms"`
	OtherMedian float64 `json:"verifier_median_ms"` // a verifier on its feed
	OtherMax    float64 `json:"verifier_max_ms"`
}

// effectTrials is how many sign-outs time-to-effect measures.
const effectTrials = 20

// measureEffect starts a full sidecar and a verifier on its feed, then,
// effectTrials times: signs a benchmark user in, takes a JWT, signs out,
// and times until each of the two refuses that JWT (401).
func (b *bench) measureEffect(ctx context.Context) (effectReport, error) {
	full, err := b.startSidecar(ctx, sidecarConfig{name: "effect", access: false})
	if err != nil {
		return effectReport{}, err
	}
	defer full.stop()
	v, err := b.startSidecar(ctx, sidecarConfig{name: "effect-verifier", jwksURL: "http://" + full.addr + "/api/auth/jwks"})
	if err != nil {
		return effectReport{}, err
	}
	defer v.stop()
	client := newSetupClient()
	defer client.CloseIdleConnections()
	var self, other []float64
	for i := range effectTrials {
		cookie, err := signIn(ctx, client, "http://"+full.addr, i%max(1, b.fx.signIns))
		if err != nil {
			return effectReport{}, fmt.Errorf("time to effect: sign-in: %w", err)
		}
		cookies := []string{cookie}
		jwts, err := fetchJWTs(ctx, full.addr, cookies, 1, 10*time.Second)
		if err != nil || len(jwts) == 0 {
			return effectReport{}, fmt.Errorf("time to effect: no JWT: %v", err)
		}
		for _, addr := range []string{full.addr, v.addr} {
			if code := bearerStatus(ctx, client, addr, jwts[0]); code != 200 {
				return effectReport{}, fmt.Errorf("time to effect: %s answered %d before the sign-out", addr, code)
			}
		}
		// At a random point of the poll interval: trials paced by the
		// last one's 401 would all land just after a poll.
		time.Sleep(rand.N(time.Second))
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+full.addr+"/api/auth/sign-out", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Cookie", cookies[0])
		req.Header.Set("Origin", b.base) // a cookie-bearing POST names its origin
		res, err := client.Do(req)
		if err != nil {
			return effectReport{}, err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return effectReport{}, fmt.Errorf("time to effect: sign-out answered %d", res.StatusCode)
		}
		start := time.Now()
		for j, addr := range []string{full.addr, v.addr} {
			for bearerStatus(ctx, client, addr, jwts[0]) != 401 {
				if time.Since(start) > 10*time.Second {
					return effectReport{}, fmt.Errorf("time to effect: %s still accepts a signed-out JWT after 10s", addr)
				}
				time.Sleep(2 * time.Millisecond)
			}
			ms := float64(time.Since(start).Microseconds()) / 1000
			if j == 0 {
				self = append(self, ms)
			} else {
				other = append(other, ms)
			}
		}
	}
	return effectReport{Trials: effectTrials, SelfMedian: median(self), SelfMax: slices.Max(self), OtherMedian: median(other), OtherMax: slices.Max(other)}, nil
}

// bearerStatus is a business GET's status with jwt.
func bearerStatus(ctx context.Context, client *http.Client, addr, jwt string) int {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/tasks", nil)
	req.Header.Set("Authorization", "Bearer "+jwt)
	res, err := client.Do(req)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}
