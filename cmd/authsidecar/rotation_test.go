package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/pgtest"
)

// TestRotationOnFleetUnderLoad: two replicas on PostgreSQL and a verifier
// in front of them, under load, while "keys rotate" runs: no valid token is
// ever refused. The load is users taking fresh JWTs from either replica
// (get-session) and presenting each to both replicas and the verifier, and
// tokens naming unknown kids sent to all three all along, so every key
// cache reads its keys as often as its keys.cooldown allows: the worst case
// for a key that would sign before every cache may fetch it.
func TestRotationOnFleetUnderLoad(t *testing.T) {
	url := pgtest.URL(t)
	up := echoUpstream(t)
	rs := startReplicas(t, 2, url, up.URL, "") // keys.cooldown 1s
	a, b := rs[0].instance, rs[1].instance
	vcfg, vport := writeConfigFile(t, t.TempDir(), "verifier.yaml", fmt.Sprintf(`mode: verifier
base_url: "http://app.example.test"
upstream: %q
keys: { jwks_url: "%s/api/auth/jwks", cooldown: 1s }
auth: { issuer: "http://app.example.test" }
`, up.URL, a.base))
	v := startBinary(t, vcfg, vport).instance
	targets := []*instance{a, b, v}
	names := []string{"replica A", "replica B", "verifier"}

	var cookies []string
	for i := range 4 {
		c, _ := signUp(t, rs[i%2].instance, fmt.Sprintf("user%d@example.com", i), "correct-horse-battery")
		cookies = append(cookies, c)
	}
	oldKID := kidOf(t, getJWT(t, a, cookies[0]))

	client := &http.Client{Timeout: 10 * time.Second}
	get := func(base, path string, hdr ...string) (*http.Response, error) {
		req, _ := http.NewRequest("GET", base+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res, nil
	}

	var (
		mu                sync.Mutex
		refused           []string
		errs              []error
		verified, fresh   [3]int64 // per target: valid tokens verified; of them, signed by a key other than the first
		issued, newIssued atomic.Int64
		noise             atomic.Int64
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				from := rs[(w+i)%2].instance
				res, err := get(from.base, "/api/auth/get-session", "Cookie", cookies[(w+i)%len(cookies)])
				if err != nil || res.StatusCode != 200 || res.Header.Get("Set-Auth-Jwt") == "" {
					fail(fmt.Errorf("get-session: %v %v", res, err))
					return
				}
				jwt := res.Header.Get("Set-Auth-Jwt")
				rotated := kidIn(jwt) != oldKID
				issued.Add(1)
				if rotated {
					newIssued.Add(1)
				}
				for ti, to := range targets {
					res, err := get(to.base, "/api/tasks", "Authorization", "Bearer "+jwt)
					if err != nil {
						fail(err)
						return
					}
					mu.Lock()
					if res.StatusCode != 200 {
						refused = append(refused, fmt.Sprintf("%s refused %d a JWT of kid %s from %s", names[ti], res.StatusCode, kidIn(jwt), from.base))
					} else {
						verified[ti]++
						if rotated {
							fresh[ti]++
						}
					}
					mu.Unlock()
				}
			}
		}()
	}
	// Tokens naming kids nobody has: each makes a cache read its keys
	// whenever its cooldown allows.
	wg.Add(1)
	go func() {
		defer wg.Done()
		hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA","kid":"no-such-kid","typ":"JWT"}`))
		for i := 0; ctx.Err() == nil; i++ {
			for _, to := range targets {
				if res, err := get(to.base, "/api/tasks", "Authorization", "Bearer "+hdr+".e30.c2ln"); err == nil && res.StatusCode == 401 {
					noise.Add(1)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	time.Sleep(2 * time.Second)
	cfgPath, _ := replicaConfig(t, t.TempDir(), "cli.yaml", up.URL, "")
	rotatedAt := time.Now()
	out := cliWithEnv(t, map[string]string{"AUTH_SECRET": e2eSecret, "DATABASE_URL": url}, argv(cfgPath, "keys rotate")...)
	newKID := newKID(t, out)
	// Run until each target has verified the new key's JWTs for 3s, at
	// most 30s.
	var switchedAt time.Time
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		mu.Lock()
		all := fresh[0] > 0 && fresh[1] > 0 && fresh[2] > 0
		mu.Unlock()
		if all && switchedAt.IsZero() {
			switchedAt = time.Now()
		}
		if !switchedAt.IsZero() && time.Since(switchedAt) > 3*time.Second {
			break
		}
	}
	stop()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("load errors: %v", errs[:min(len(errs), 5)])
	}
	t.Logf("MEASURE rotation on a fleet under load: %d JWTs issued (%d with the new key %s, first signed %.1fs after keys rotate); verified A %d, B %d, verifier %d (of them with the new key %d, %d, %d); %d unknown-kid tokens refused; valid tokens refused: %d",
		issued.Load(), newIssued.Load(), newKID, switchedAt.Sub(rotatedAt).Seconds(), verified[0], verified[1], verified[2], fresh[0], fresh[1], fresh[2], noise.Load(), len(refused))
	if len(refused) > 0 {
		t.Errorf("%d valid tokens refused during the rotation, want 0; first: %s", len(refused), strings.Join(refused[:min(len(refused), 5)], "; "))
	}
	if switchedAt.IsZero() {
		t.Fatalf("the new key never reached every target: verified with it %v", fresh)
	}
	if noise.Load() == 0 {
		t.Error("no unknown-kid token was refused: the load did not keep the caches reading")
	}
	var body struct{ Keys []struct{ Kid string } }
	if r, err := client.Get(a.base + "/api/auth/jwks"); err == nil {
		json.NewDecoder(r.Body).Decode(&body)
		r.Body.Close()
	}
	if len(body.Keys) != 2 {
		t.Errorf("JWKS after the rotation: %+v, want the old key and %s", body.Keys, newKID)
	}
}

// kidIn is kidOf for goroutines: "" when the header has none.
func kidIn(jwt string) string {
	b, _ := base64.RawURLEncoding.DecodeString(strings.Split(jwt, ".")[0])
	var h struct{ Kid string }
	json.Unmarshal(b, &h)
	return h.Kid
}
