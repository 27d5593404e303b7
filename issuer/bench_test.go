package issuer_test

import (
	"bufio"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
)

// BenchmarkSignInTiming compares, at the real scrypt cost, how long a
// sign-in takes for an unknown email and for a wrong password (200 tries
// each, interleaved). Run: go test -run XXX -bench SignInTiming -benchtime 1x ./issuer
func BenchmarkSignInTiming(b *testing.B) {
	e := newEnvB(b)
	e.signUp("known@example.com", pw)
	measure := func(email string) time.Duration {
		start := time.Now()
		r := e.postJSON("/api/auth/sign-in/email", map[string]any{"email": email, "password": "wrong-password-123"})
		if r.status != 401 {
			b.Fatalf("got %d %s", r.status, r.body)
		}
		return time.Since(start)
	}
	for b.Loop() {
		var unknown, wrong []time.Duration
		for range 200 {
			unknown = append(unknown, measure("nobody@example.com"))
			wrong = append(wrong, measure("known@example.com"))
		}
		mu, mw := median(unknown), median(wrong)
		b.ReportMetric(float64(mu.Microseconds())/1000, "ms-median-unknown-email")
		b.ReportMetric(float64(mw.Microseconds())/1000, "ms-median-wrong-password")
		b.ReportMetric(float64(mw)/float64(mu), "ratio")
	}
}

// BenchmarkConcurrentSignInMemory fires 500 concurrent sign-ins at the
// real scrypt cost (~32 MiB each) and reports the process's peak RSS:
// the hashing semaphore keeps it near GOMAXPROCS hashes, not 500.
// Run alone (peak RSS is per process):
// go test -run XXX -bench ConcurrentSignInMemory -benchtime 1x ./issuer
func BenchmarkConcurrentSignInMemory(b *testing.B) {
	e := newEnvB(b)
	e.signUp("mem@example.com", pw)
	before := vmHWM(b)
	for b.Loop() {
		var wg sync.WaitGroup
		for range 500 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest("POST", e.srv.URL+"/api/auth/sign-in/email", strings.NewReader(`{"email":"mem@example.com","password":"`+pw+`"}`))
				req.Header.Set("Content-Type", "application/json")
				if res, err := http.DefaultClient.Do(req); err == nil {
					res.Body.Close()
				}
			}()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(before)/1024, "MiB-peak-rss-before")
	b.ReportMetric(float64(vmHWM(b))/1024, "MiB-peak-rss-after")
}

// newEnvB is newEnv at Better Auth's real scrypt cost.
func newEnvB(b *testing.B) *env {
	b.Helper()
	return newEnv(b, func(o *issuer.Options) { o.PasswordCost = issuer.ScryptParams{} })
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// vmHWM is the process's peak resident set, in KiB.
func vmHWM(b *testing.B) int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc: peak RSS needs Linux")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return n
		}
	}
	return 0
}
