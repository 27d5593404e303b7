package jwks_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/jwks"
	"github.com/authsidecar/authsidecar/proxy"
)

var b64 = base64.RawURLEncoding

// okp is a JWKS entry for an Ed25519 public key, as Better Auth serves it.
func okp(kid string, pub ed25519.PublicKey) map[string]any {
	return map[string]any{"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": b64.EncodeToString(pub), "alg": "EdDSA"}
}

// with returns a copy of m with k set to v, or removed when v is nil.
func with(m map[string]any, k string, v any) map[string]any {
	out := map[string]any{}
	for key, val := range m {
		out[key] = val
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

func doc(entries ...map[string]any) string {
	b, _ := json.Marshal(map[string]any{"keys": entries})
	return string(b)
}

// logBuffer collects log lines; the Fetcher logs from request goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.TrimSpace(l.b.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// jwksServer serves body as the JWKS, checking the request as it comes.
func jwksServer(t *testing.T, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.Header.Get("Accept") != "application/json" {
			t.Errorf("server got %s with Accept %q, want GET with application/json", r.Method, r.Header.Get("Accept"))
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newFetcher(t *testing.T, o jwks.Options) (*jwks.Fetcher, *logBuffer) {
	t.Helper()
	lb := &logBuffer{}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(lb, nil))
	}
	f, err := jwks.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return f, lb
}

func kids(keys []proxy.Key) []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.KID)
	}
	return out
}

// TestFetcherDocuments: which entries of a JWKS are used, which are
// skipped (one log line each), and which documents are refused whole.
func TestFetcherDocuments(t *testing.T) {
	pub1, _, _ := ed25519.GenerateKey(nil)
	pub2, _, _ := ed25519.GenerateKey(nil)
	x25519 := make([]byte, 32)
	good := okp("k1", pub1)
	tests := []struct {
		name     string
		body     string
		wantKIDs []string // nil: an error is expected
		wantErr  string
		skipped  int // log lines for skipped entries
	}{
		{"two Ed25519 keys", doc(good, okp("k2", pub2)), []string{"k1", "k2"}, "", 0},
		{"Better Auth shape (no alg, no use)", doc(with(good, "alg", nil)), []string{"k1"}, "", 0},
		{"use sig", doc(with(good, "use", "sig")), []string{"k1"}, "", 0},
		{"unknown members ignored", doc(with(good, "key_ops", []string{"verify"})), []string{"k1"}, "", 0},
		{"mixed: the usable one kept", doc(
			map[string]any{"kty": "RSA", "kid": "rsa", "n": "sXch", "e": "AQAB", "alg": "RS256"},
			map[string]any{"kty": "EC", "kid": "ec", "crv": "P-256", "x": "f83O", "y": "x_FE"},
			map[string]any{"kty": "OKP", "kid": "x25519", "crv": "X25519", "x": b64.EncodeToString(x25519)},
			with(okp("rs256", pub2), "alg", "RS256"),
			with(okp("short", pub2), "x", b64.EncodeToString(pub2[:31])),
			with(okp("padded", pub2), "x", base64.URLEncoding.EncodeToString(pub2)),
			with(okp("std-b64", pub2), "x", base64.StdEncoding.EncodeToString(append([]byte{0xfb, 0xff}, pub2[2:]...))),
			with(okp("", pub2), "kid", nil),
			with(okp("enc", pub2), "use", "enc"),
			with(okp("private", pub2), "d", b64.EncodeToString(make([]byte, 32))),
			with(okp("numeric-kid", pub2), "kid", 7),
			good,
		), []string{"k1"}, "", 11},
		{"no usable key", doc(with(good, "crv", "X25519"), with(good, "alg", "ES256")), nil, "no usable Ed25519 signing key among 2 entries", 2},
		{"empty set", `{"keys":[]}`, nil, "no usable Ed25519 signing key among 0 entries", 0},
		{"duplicate kid", doc(good, okp("k1", pub2)), nil, `kid "k1" appears twice`, 0},
		{"invalid JSON", `{"keys":[`, nil, "not a JWKS", 0},
		{"not an object", `[]`, nil, "not a JWKS", 0},
		{"no keys member", `{"kids":[]}`, nil, "not a JWKS", 0},
		{"keys null", `{"keys":null}`, nil, "not a JWKS", 0},
		{"repeated member", `{"keys":[` + mustJSON(good)[:len(mustJSON(good))-1] + `,"x":"` + b64.EncodeToString(pub2) + `"}]}`, nil, "not a JWKS", 0},
		{"HTML error page", "<html>\n<h1>502 Bad Gateway</h1>" + strings.Repeat("x", 500), nil, "not a JWKS", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := jwksServer(t, tt.body)
			f, lb := newFetcher(t, jwks.Options{URL: srv.URL + "/api/auth/jwks"})
			keys, err := f.PublicKeys(context.Background())
			if tt.wantKIDs == nil {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v %v, want an error containing %q", kids(keys), err, tt.wantErr)
				}
				if len(err.Error()) > 300 || strings.Contains(err.Error(), "\n") {
					t.Errorf("error carries the body beyond a short sanitized prefix: %q", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(kids(keys), tt.wantKIDs) {
					t.Fatalf("got kids %v, want %v", kids(keys), tt.wantKIDs)
				}
				for _, k := range keys {
					want := pub1
					if k.KID == "k2" {
						want = pub2
					}
					if !k.Public.Equal(want) {
						t.Errorf("kid %s: got key %x, want %x", k.KID, []byte(k.Public), []byte(want))
					}
				}
			}
			if got := len(lb.lines()); got != tt.skipped {
				t.Errorf("got %d log lines, want %d (one per skipped entry):\n%s", got, tt.skipped, strings.Join(lb.lines(), "\n"))
			}
			// The next fetch (max age) finds the same document: not a line more.
			f.PublicKeys(context.Background())
			if got := len(lb.lines()); got != tt.skipped {
				t.Errorf("second fetch: got %d log lines in all, want still %d", got, tt.skipped)
			}
		})
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestFetcherBodyLimit: a body over MaxBytes is refused whether or not
// the server announces its length, and never read whole; one of exactly
// MaxBytes is fine.
func TestFetcherBodyLimit(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	body := doc(okp("k1", pub))
	const limit = 4096
	pad := func(n int) string { return body + strings.Repeat(" ", n-len(body)) }
	tests := []struct {
		name    string
		body    string
		chunked bool // no Content-Length: the limit must hold while reading
		wantErr bool
	}{
		{"exactly MaxBytes", pad(limit), false, false},
		{"exactly MaxBytes, chunked", pad(limit), true, false},
		{"one byte over", pad(limit + 1), false, true},
		{"one byte over, chunked", pad(limit + 1), true, true},
		{"64 MiB, chunked", "", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sent atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.body == "" { // endless: stops when the client hangs up
					chunk := []byte(`{"keys":[` + strings.Repeat(" ", 32<<10))
					for i := 0; i < 2048; i++ {
						n, err := w.Write(chunk)
						sent.Add(int64(n))
						if err != nil {
							return
						}
						w.(http.Flusher).Flush()
					}
					return
				}
				if tt.chunked {
					w.Write([]byte(tt.body[:10]))
					w.(http.Flusher).Flush()
					w.Write([]byte(tt.body[10:]))
					return
				}
				w.Header().Set("Content-Length", fmt.Sprint(len(tt.body)))
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			f, _ := newFetcher(t, jwks.Options{URL: srv.URL, MaxBytes: limit})
			keys, err := f.PublicKeys(context.Background())
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got %v, want an error", kids(keys))
				}
				if !strings.Contains(err.Error(), "4096 bytes") {
					t.Errorf("error %q does not name the limit", err)
				}
			} else if err != nil || len(keys) != 1 {
				t.Fatalf("got %v %v, want k1", kids(keys), err)
			}
			srv.Close() // waits for the handler
			if n := sent.Load(); n > 16<<20 {
				t.Errorf("the server got %d bytes out before the fetch hung up, want far less than 64 MiB", n)
			}
		})
	}
}

// TestFetcherRefusesRedirects: a 3xx is a failed fetch naming the status,
// and its target is never asked.
func TestFetcherRefusesRedirects(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	var targetHits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		targetHits.Add(1)
		w.Write([]byte(doc(okp("evil", pub))))
	}))
	defer target.Close()
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.URL+"/jwks", code)
			}))
			defer srv.Close()
			f, _ := newFetcher(t, jwks.Options{URL: srv.URL})
			keys, err := f.PublicKeys(context.Background())
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("status %d", code)) || !strings.Contains(err.Error(), "redirect") {
				t.Fatalf("got %v %v, want an error naming status %d as a redirect", kids(keys), err, code)
			}
			if n := targetHits.Load(); n != 0 {
				t.Fatalf("the redirect target got %d requests, want 0", n)
			}
		})
	}
}

// TestFetcherStatus: a non-200 fails with the status and at most a short,
// printable prefix of the body.
func TestFetcherStatus(t *testing.T) {
	for _, code := range []int{204, 404, 500, 503} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(code)
				fmt.Fprint(w, "upstream exploded\nlevel=ERROR msg=forged\x1b[31m"+strings.Repeat("secret", 1000))
			}))
			defer srv.Close()
			f, _ := newFetcher(t, jwks.Options{URL: srv.URL})
			_, err := f.PublicKeys(context.Background())
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("status %d", code)) {
				t.Fatalf("got %v, want an error naming status %d", err, code)
			}
			if msg := err.Error(); strings.ContainsAny(msg, "\n\x1b") || len(msg) > 300 || strings.Count(msg, "secret") > 10 {
				t.Errorf("error carries raw body: %q", msg)
			}
		})
	}
}

// TestFetcherTimeout: a server that accepts and never answers costs one
// Timeout, not more.
func TestFetcherTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	f, _ := newFetcher(t, jwks.Options{URL: srv.URL, Timeout: 100 * time.Millisecond})
	start := time.Now()
	_, err := f.PublicKeys(context.Background())
	if err == nil {
		t.Fatal("got nil, want a timeout error")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("fetch took %v, want about the 100ms Timeout", d)
	}
	// The caller's deadline counts too (the KeyCache's ReadTimeout).
	f, _ = newFetcher(t, jwks.Options{URL: srv.URL, Timeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := f.PublicKeys(ctx); err == nil || time.Since(start) > 2*time.Second {
		t.Errorf("with a 100ms context: got %v after %v, want an error after about 100ms", err, time.Since(start))
	}
}

// TestFetcherTLS: an https JWKS under a private CA fails on the system
// roots alone and works once CAFile names that CA.
func TestFetcherTLS(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(doc(okp("k1", pub))))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	srv.StartTLS()
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	f, _ := newFetcher(t, jwks.Options{URL: srv.URL})
	if _, err := f.PublicKeys(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without CAFile: got %v, want a certificate error", err)
	}
	f, _ = newFetcher(t, jwks.Options{URL: srv.URL, CAFile: caFile})
	keys, err := f.PublicKeys(context.Background())
	if err != nil || len(keys) != 1 || !keys[0].Public.Equal(pub) {
		t.Fatalf("with CAFile: got %v %v, want k1", kids(keys), err)
	}
}

// TestNewRefuses: options refused before any fetch, each naming its cause.
func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	noCerts := filepath.Join(dir, "empty.pem")
	os.WriteFile(noCerts, []byte("not a certificate\n"), 0o600)
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name string
		o    jwks.Options
		want string
	}{
		{"empty URL", jwks.Options{}, "not an absolute http or https URL"},
		{"relative URL", jwks.Options{URL: "/api/auth/jwks"}, "not an absolute http or https URL"},
		{"ftp URL", jwks.Options{URL: "ftp://auth.example.com/jwks"}, "not an absolute http or https URL"},
		{"no host", jwks.Options{URL: "https:///jwks"}, "not an absolute http or https URL"},
		{"opaque", jwks.Options{URL: "https:auth.example.com"}, "not an absolute http or https URL"},
		{"credentials", jwks.Options{URL: "https://user:pw@auth.example.com/jwks"}, "must not carry credentials"},
		{"fragment", jwks.Options{URL: "https://auth.example.com/jwks#x"}, "fragment"},
		{"unparsable", jwks.Options{URL: "https://auth.example.com/%zz"}, "jwks url"},
		{"CA file missing", jwks.Options{URL: "https://auth.example.com/jwks", CAFile: missing}, missing},
		{"CA file without certificates", jwks.Options{URL: "https://auth.example.com/jwks", CAFile: noCerts}, noCerts + ": no PEM certificate"},
		{"CAFile with Client", jwks.Options{URL: "https://auth.example.com/jwks", CAFile: noCerts, Client: &http.Client{}}, "exclusive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := jwks.New(tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v %v, want an error containing %q", f, err, tt.want)
			}
			if strings.Contains(fmt.Sprint(err), "pw@") {
				t.Errorf("error %q repeats the URL's credentials", err)
			}
		})
	}
}

// TestFetcherInjectedClient: a given client is used, without its redirect
// policy, and is not changed.
func TestFetcherInjectedClient(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	var used atomic.Bool
	srv := jwksServer(t, doc(okp("k1", pub)))
	target := srv.URL
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusFound)
	}))
	defer redirector.Close()
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		used.Store(true)
		return http.DefaultTransport.RoundTrip(r)
	})}
	f, _ := newFetcher(t, jwks.Options{URL: srv.URL, Client: client})
	if _, err := f.PublicKeys(context.Background()); err != nil || !used.Load() {
		t.Fatalf("got %v (client used: %v), want the keys through the given client", err, used.Load())
	}
	f, _ = newFetcher(t, jwks.Options{URL: redirector.URL, Client: client})
	if _, err := f.PublicKeys(context.Background()); err == nil {
		t.Fatal("redirect through an injected client: got nil, want an error")
	}
	if client.CheckRedirect != nil || client.Timeout != 0 {
		t.Error("New changed the injected client")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestFetcherIsKeySource: the Fetcher feeds the proxy's key cache and
// verifier as is.
func TestFetcherIsKeySource(t *testing.T) {
	var _ proxy.KeySource = (*jwks.Fetcher)(nil)
	pub, priv, _ := ed25519.GenerateKey(nil)
	srv := jwksServer(t, doc(okp("k1", pub)))
	f, _ := newFetcher(t, jwks.Options{URL: srv.URL})
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{Source: f})
	defer kc.Close()
	if err := kc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	const iss = "https://auth.example.com"
	now := time.Now()
	h, _ := json.Marshal(map[string]any{"alg": "EdDSA", "kid": "k1", "typ": "JWT"})
	c, _ := json.Marshal(map[string]any{"sub": "user-1", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "iss": iss, "aud": iss})
	in := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	tok := in + "." + b64.EncodeToString(ed25519.Sign(priv, []byte(in)))
	v := proxy.NewJWTVerifier(proxy.JWTVerifierOptions{Keys: kc, Issuer: iss, Audience: iss})
	claims, err := v.Verify(context.Background(), tok)
	if err != nil || claims.Subject != "user-1" {
		t.Fatalf("got %+v %v, want user-1", claims, err)
	}
}
