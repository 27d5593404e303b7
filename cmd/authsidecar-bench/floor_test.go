package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// signTestJWT makes a compact EdDSA JWS the way the issuer does.
func signTestJWT(t *testing.T, priv ed25519.PrivateKey, kid string) string {
	t.Helper()
	b64 := base64.RawURLEncoding
	in := b64.EncodeToString(fmt.Appendf(nil, `{"alg":"EdDSA","kid":%q,"typ":"JWT"}`, kid)) + "." +
		b64.EncodeToString([]byte(`{"sub":"u1","jti":"j1","exp":4102444800}`))
	return in + "." + b64.EncodeToString(ed25519.Sign(priv, []byte(in)))
}

func newTestKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

// TestFloor puts the floor, with the bare mode's real ReverseProxy, in
// front of a real upstream: a token signed by its key reaches the
// upstream, and anything whose signature does not verify under that key
// is 401 with a JSON body and never forwarded.
func TestFloor(t *testing.T) {
	pub, priv := newTestKey(t)
	_, other := newTestKey(t)
	var reached atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Write(upstreamBody)
	}))
	defer up.Close()
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	pf := addProxyFlags(fs)
	if err := fs.Parse([]string{"-upstream", up.URL}); err != nil {
		t.Fatal(err)
	}
	rp, err := pf.proxy(io.Discard, "floor")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(floor{pub: pub, next: rp})
	defer srv.Close()

	good := signTestJWT(t, priv, "k1")
	dot := strings.LastIndexByte(good, '.')
	sig := good[dot+1:]
	flipped := []byte(sig) // still base64url, another signature
	flipped[10] = 'A'
	if sig[10] == 'A' {
		flipped[10] = 'B'
	}
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"valid", "Bearer " + good, http.StatusOK},
		{"no header", "", http.StatusUnauthorized},
		{"not Bearer", "Basic " + good, http.StatusUnauthorized},
		{"no dot", "Bearer " + strings.ReplaceAll(good, ".", ""), http.StatusUnauthorized},
		{"other key", "Bearer " + signTestJWT(t, other, "k1"), http.StatusUnauthorized},
		{"payload changed", "Bearer " + strings.Replace(good, ".", ".e", 1), http.StatusUnauthorized},
		{"signature changed", "Bearer " + good[:dot+1] + string(flipped), http.StatusUnauthorized},
		{"signature short", "Bearer " + good[:len(good)-1], http.StatusUnauthorized},
		{"signature padded", "Bearer " + good + "==", http.StatusUnauthorized},
		{"signature not base64url", "Bearer " + good[:len(good)-1] + "+", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := reached.Load()
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/tasks", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Fatalf("status %d, want %d (body %q)", res.StatusCode, tc.want, body)
			}
			forwarded := reached.Load() - before
			switch tc.want {
			case http.StatusOK:
				if forwarded != 1 || string(body) != string(upstreamBody) {
					t.Errorf("upstream reached %d times, body %q; want once, %q", forwarded, body, upstreamBody)
				}
			default:
				if forwarded != 0 {
					t.Errorf("upstream reached %d times, want 0", forwarded)
				}
				if ct := res.Header.Get("Content-Type"); ct != "application/json" || string(body) != string(unauthorizedBody) {
					t.Errorf("got %s %q, want application/json %q", ct, body, unauthorizedBody)
				}
			}
		})
	}
}

// TestFetchKey serves a real JWKS over HTTP: the floor takes the key of
// the kid it is given, and refuses to start without it.
func TestFetchKey(t *testing.T) {
	pub1, _ := newTestKey(t)
	pub2, _ := newTestKey(t)
	x := base64.RawURLEncoding.EncodeToString
	doc := fmt.Sprintf(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":%q,"kid":"k1","alg":"EdDSA"},{"kty":"OKP","crv":"Ed25519","x":%q,"kid":"k2","alg":"EdDSA"}]}`,
		x(pub1), x(pub2))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, doc)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name, url, kid string
		want           ed25519.PublicKey // nil: an error
	}{
		{"first", srv.URL, "k1", pub1},
		{"second", srv.URL, "k2", pub2},
		{"unknown kid", srv.URL, "k3", nil},
		{"not loopback", strings.Replace(srv.URL, "127.0.0.1", "localhost", 1), "k1", nil},
		{"not http", strings.Replace(srv.URL, "http:", "https:", 1), "k1", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fetchKey(context.Background(), tc.url, tc.kid)
			switch {
			case tc.want == nil && err == nil:
				t.Fatalf("got key %x, want an error", got)
			case tc.want != nil && err != nil:
				t.Fatalf("error %v, want key %x", err, tc.want)
			case tc.want != nil && !got.Equal(tc.want):
				t.Errorf("got key %x, want %x", got, tc.want)
			}
		})
	}
}

func TestTokenKID(t *testing.T) {
	_, priv := newTestKey(t)
	b64 := base64.RawURLEncoding.EncodeToString
	for _, tc := range []struct {
		name, jwt, want string // want "": an error
	}{
		{"signed", signTestJWT(t, priv, "key-7"), "key-7"},
		{"no dot", "abc", ""},
		{"header not base64url", "a+b.c.d", ""},
		{"header not JSON", b64([]byte("kid")) + ".c.d", ""},
		{"no kid", b64([]byte(`{"alg":"EdDSA"}`)) + ".c.d", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tokenKID(tc.jwt)
			if (err != nil) != (tc.want == "") || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestSummarizeFloor: c's sidecar runs are paired with the floor's and the
// bare proxy's of the same round, and the floor with the bare proxy's.
func TestSummarizeFloor(t *testing.T) {
	run := func(tgt string, n int, rps float64) runStats {
		return runStats{Target: tgt, Run: n, RPS: rps, P99us: 1e6 / rps, CPUusPerReq: 1e6 / rps}
	}
	// The machine's speed differs by round, and so does the sidecar's
	// share of the floor (0.95, 0.92, 0.7): the median of the rounds'
	// ratios is 0.92, the ratio of the medians (4200/5000) would be 0.84.
	sr := scenarioReport{Key: string(scenNewToken), Label: "c"}
	for i, x := range []struct{ speed, share float64 }{{1, 0.95}, {0.8, 0.92}, {1.2, 0.7}} {
		sr.Runs = append(sr.Runs, run("bare", i+1, 10000*x.speed), run("floor", i+1, 5000*x.speed), run("sidecar", i+1, 5000*x.speed*x.share))
	}
	sr.summarize()
	for _, tc := range []struct {
		name string
		x    *ratios
		want float64
	}{
		{"sidecar/bare", sr.Ratio, 0.46},
		{"sidecar/floor", sr.FloorRatio, 0.92},
		{"floor/bare", sr.FloorOverBare, 0.5},
	} {
		if tc.x == nil {
			t.Errorf("%s: no ratios", tc.name)
			continue
		}
		if d := tc.x.RPS - tc.want; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s req/s = %v, want %v", tc.name, tc.x.RPS, tc.want)
		}
		if d := tc.x.CPU - 1/tc.want; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s CPU = %v, want %v", tc.name, tc.x.CPU, 1/tc.want)
		}
	}
	if sr.Bare == nil || sr.Floor == nil || sr.Bare.Runs != 3 || sr.Floor.Runs != 3 || sr.Sidecar.Runs != 3 {
		t.Fatalf("summaries bare %+v floor %+v sidecar %+v, want 3 runs each", sr.Bare, sr.Floor, sr.Sidecar)
	}
	if sr.Floor.RPS != 5000 {
		t.Errorf("floor median req/s %v, want 5000", sr.Floor.RPS)
	}
	r := report{Scenarios: []scenarioReport{sr}}
	r.finish(0)
	table := r.markdown()
	for _, want := range []string{"|  | floor | 5000 |", "| | **sidecar/bare** | **0.46x** |", "| | **sidecar/floor** | **0.92x** |",
		"goal for c (issue 14, a new token every request): req/s ratio to the floor 0.92 (want >= 0.90: met), to bare 0.46;"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}

	// Without floor runs (every scenario but c) nothing about a floor.
	var a scenarioReport
	a.Runs = []runStats{run("bare", 1, 10000), run("sidecar", 1, 9000)}
	a.summarize()
	if a.Floor != nil || a.FloorRatio != nil || a.FloorOverBare != nil || a.Ratio == nil {
		t.Errorf("a: floor %v, sidecar/floor %v, floor/bare %v, sidecar/bare %v; want only sidecar/bare", a.Floor, a.FloorRatio, a.FloorOverBare, a.Ratio)
	}

	// An A/A calibration (-aa) says so, and judges no goal by it.
	a.Key = string(scenBusiness)
	aa := report{Scenarios: []scenarioReport{a, sr}, Settings: settings{AA: true}}
	aa.finish(0)
	table = aa.markdown()
	if !strings.Contains(table, "A/A CALIBRATION") || !strings.Contains(table, "A/A calibration (-aa)") {
		t.Errorf("an A/A run's table does not say so:\n%s", table)
	}
	if strings.Contains(table, "goal for a") || strings.Contains(table, "goal for c") {
		t.Errorf("an A/A run's table judges a goal:\n%s", table)
	}
}
