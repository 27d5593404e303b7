package issuer

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/passhash"
	"golang.org/x/crypto/argon2"
)

// queueUpN queues a request of client for n slots, as queueUp does.
func queueUpN(t *testing.T, s *hashSlots, client string, n int, ctx context.Context, got chan<- string) {
	t.Helper()
	s.mu.Lock()
	before := len(s.queues[client])
	s.mu.Unlock()
	go func() {
		if err := s.acquireN(ctx, client, nil, n); err != nil {
			got <- client + ":busy"
			return
		}
		got <- client
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		q := len(s.queues[client])
		s.mu.Unlock()
		if q > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's request never queued", client)
		}
	}
}

// TestHashSlotsWeighted: a request for both slots waits until both are
// free, and a single-slot request that came after it does not pass it;
// when it gives up, the one behind it gets the free slot at once.
func TestHashSlotsWeighted(t *testing.T) {
	s := newHashSlots(2)
	if err := s.acquire(context.Background(), "main", nil); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 4)
	queueUpN(t, s, "big", 2, context.Background(), got)
	queueUpN(t, s, "small", 1, context.Background(), got)
	select {
	case c := <-got:
		t.Fatalf("%s got a slot while one was busy and the two-slot request was first", c)
	case <-time.After(20 * time.Millisecond):
	}
	s.release() // main's: both are free, the big request takes both
	if c := <-got; c != "big" {
		t.Fatalf("got %s first, want big", c)
	}
	s.releaseN(2)
	if c := <-got; c != "small" {
		t.Fatalf("got %s, want small", c)
	}
	s.release()

	// A two-slot request that gives up lets the one behind it through.
	if err := s.acquire(context.Background(), "main", nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	queueUpN(t, s, "big", 2, ctx, got)
	queueUpN(t, s, "small", 1, context.Background(), got)
	cancel()
	want := []string{"big:busy", "small"}
	have := []string{<-got, <-got}
	slices.Sort(have)
	if !slices.Equal(have, want) {
		t.Fatalf("got %v, want %v", have, want)
	}
	s.releaseN(2)
	if s.busy != 0 || s.waiting != 0 {
		t.Errorf("got %d busy and %d waiting at the end, want 0 and 0", s.busy, s.waiting)
	}
}

// TestForeignHashClaims: a foreign hash holds a slot per native buffer's
// worth of memory and per thread, within the slots there are.
func TestForeignHashClaims(t *testing.T) {
	h := newHasher(ScryptParams{N: 16384, R: 16, P: 1}, 4) // 32 MiB a slot
	for _, c := range []struct {
		stored string
		want   work
	}{
		{argon2Stored(t, "pw", 64<<10, 1, 1, false), work{2, 64 << 20}},
		{argon2Stored(t, "pw", 32<<10, 1, 1, false), work{1, 32 << 20}},
		{argon2Stored(t, "pw", 1<<10, 1, 3, false), work{3, 1 << 20}},
		{argon2Stored(t, "pw", 256<<10, 1, 1, false), work{4, 256 << 20}}, // all four: it runs alone
		{"$2y$04$XnIFEy0XpvRAwZhqPMn87OgvGMlkXlqEHolm23XVNafI142X9m7nq", work{1, 0}},
	} {
		ph, err := parseForTest(c.stored)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.foreign(ph.Cost()); got != c.want {
			t.Errorf("%s %+v: got %+v, want %+v", ph.Format(), ph.Cost(), got, c.want)
		}
	}
}

// TestHasherForeignMemoryBounded: a burst of sign-ins to accounts whose
// argon2 hashes need twice a slot's memory holds no more than the slots'
// buffers: each takes two slots, so they run one at a time.
func TestHasherForeignMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("argon2 hashes of 32 MiB")
	}
	const (
		mib     = 1 << 20
		bufMiB  = 16 // the native buffer: 128 x N x r
		slots   = 2
		slack   = 8
		hashes  = 6
		objects = "/memory/classes/heap/objects:bytes"
	)
	stored := argon2Stored(t, "correct-horse-battery", 2*bufMiB<<10, 1, 1, true)
	runtime.GC()
	h := newHasher(ScryptParams{N: 16384, R: 8, P: 1}, slots)
	h.release = func() {}
	sample := []rtmetrics.Sample{{Name: objects}}
	rtmetrics.Read(sample)
	base := sample[0].Value.Uint64()
	stop := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var top uint64
		s := []rtmetrics.Sample{{Name: objects}}
		for {
			rtmetrics.Read(s)
			top = max(top, s[0].Value.Uint64())
			select {
			case <-stop:
				peak <- top
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	var wg sync.WaitGroup
	for range hashes {
		wg.Go(func() {
			if ok, err := h.verify(context.Background(), "correct-horse-battery", stored); err != nil || !ok {
				t.Errorf("got %t, %v; want true, nil", ok, err)
			}
		})
	}
	wg.Wait()
	close(stop)
	top := <-peak
	grew := float64(top-min(top, base)) / mib
	t.Logf("%d argon2 hashes of %d MiB on %d slots of %d MiB: heap objects peaked %.1f MiB above the start", hashes, 2*bufMiB, slots, bufMiB, grew)
	if grew > slots*bufMiB+slack {
		t.Errorf("heap objects grew by %.1f MiB during the burst, want at most %d x %d + %d MiB", grew, slots, bufMiB, slack)
	}
}

// TestForeignHashPadded: a wrong password against a cheap foreign hash
// (MD5: a microsecond) takes about as long as the sidecar's own hash,
// which is what an unknown address costs (the dummy hash): medians of
// the same run, compared as a ratio.
func TestForeignHashPadded(t *testing.T) {
	h := newHasher(ScryptParams{N: 16384, R: 8, P: 1}, 1) // ~40 ms
	ctx := context.Background()
	dummy, err := h.hash(ctx, "dummy password for timing")
	if err != nil {
		t.Fatal(err)
	}
	sum := md5.Sum([]byte("the right password"))
	weak := hex.EncodeToString(sum[:])
	median := func(stored string) time.Duration {
		var ds []time.Duration
		for range 7 {
			began := time.Now()
			if ok, err := h.verify(ctx, "a wrong password", stored); err != nil || ok {
				t.Fatalf("got %t, %v; want false, nil", ok, err)
			}
			ds = append(ds, time.Since(began))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	native, foreign := median(dummy), median(weak)
	ratio := float64(foreign) / float64(native)
	t.Logf("unknown address (the dummy hash): %v, MD5 account: %v, ratio %.2f", native, foreign, ratio)
	if ratio < 0.5 || ratio > 2 {
		t.Errorf("a wrong password on an MD5 account took %.2fx what the dummy hash takes, want 0.5-2x", ratio)
	}
}

// argon2Stored is a PHC argon2 hash of password: m KiB, t passes, p lanes.
func argon2Stored(t *testing.T, password string, m, tm uint32, p uint8, id bool) string {
	t.Helper()
	salt := []byte("0123456789abcdef")
	name, key := "argon2i", argon2.Key([]byte(password), salt, tm, m, p, 32)
	if id {
		name, key = "argon2id", argon2.IDKey([]byte(password), salt, tm, m, p, 32)
	}
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$%s$v=19$m=%d,t=%d,p=%d$%s$%s", name, m, tm, p, enc.EncodeToString(salt), enc.EncodeToString(key))
}

func parseForTest(stored string) (passhash.Hash, error) {
	return passhash.Parse(stored, passhash.Options{AllowWeak: true})
}
