package issuer

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/scrypt"
	"golang.org/x/text/unicode/norm"
)

// ScryptParams is the password hashing cost. The zero value means Better
// Auth's parameters (N=16384, r=16, p=1), ~32 MiB and ~80 ms per hash; tests
// set cheaper ones.
type ScryptParams struct {
	N, R, P int
}

func (p ScryptParams) orDefault() ScryptParams {
	if p.N == 0 && p.R == 0 && p.P == 0 {
		return ScryptParams{N: 16384, R: 16, P: 1}
	}
	return p
}

const scryptKeyLen = 64

var errBadHash = errors.New("malformed password hash")

// errHashBusy: the request's deadline (less storeReserve) passed while it
// waited for a free hashing slot. It is overload, not a failure: 503 with Retry-After.
var errHashBusy = errors.New("password hashing: every slot busy until the request deadline")

// hasher computes scrypt hashes in Better Auth's format, at most cap(sem)
// at a time. golang.org/x/crypto/scrypt allocates its work memory,
// 128*N*r bytes (32 MiB at Better Auth's cost), on every call and leaves
// it to the garbage collector, whose next cycle may be a whole heap goal
// away: a burst of sign-ins would pile up dead buffers (150 MiB of RSS
// after a handful). Two steps keep it to cap(sem) buffers, and none once
// the burst is over:
//
//   - before a hash starts, if another one ended since the last collection,
//     the collector runs (runtime.GC, ~1 ms on this heap against ~80 ms for
//     a hash), so the new buffer takes the dead one's pages instead of
//     growing the heap;
//   - when the last hash ends and none is waiting, the heap's free pages go
//     back to the OS (debug.FreeOSMemory) before that sign-in is answered,
//     so requests arriving right after a burst do not stack their memory
//     on top of it.
//
// Within a burst the pages stay with the process and are reused; an
// isolated sign-in pays the page faults of a fresh 32 MiB (a few ms).
type hasher struct {
	params  ScryptParams
	sem     chan struct{}
	waiting atomic.Int64 // requests queued for a slot

	// dead: a hash ended since the last collection, so its buffer is
	// garbage on the heap. collecting serializes the check and the
	// collection, so that two hashes starting together both wait for it.
	dead       atomic.Bool
	collecting sync.Mutex
	collect    func() // runtime.GC

	mu        sync.Mutex
	running   int        // hashes holding a slot
	releasing sync.Mutex // one release at a time
	release   func()     // collects and returns free heap pages to the OS: debug.FreeOSMemory
}

func newHasher(params ScryptParams, concurrency int) *hasher {
	return &hasher{params: params.orDefault(), sem: make(chan struct{}, concurrency), collect: runtime.GC, release: debug.FreeOSMemory}
}

// storeReserve is the part of a request's deadline that waiting for a
// hashing slot leaves to the database work after the hash (a sign-in
// still writes its session): a request that waited in a burst gets a
// clear "busy" rather than a store timeout.
const storeReserve = time.Second

// waitingPerSlot bounds the queue for hashing slots: 32 per slot is ~2.5 s
// of hashing at Better Auth's cost, within a request's deadline. Beyond it
// a sign-in is answered 503 with Retry-After at once.
const waitingPerSlot = 32

// acquire waits for a hashing slot; put gives it back.
func (h *hasher) acquire(ctx context.Context) error {
	var giveUp <-chan time.Time
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		t := time.NewTimer(left - min(storeReserve, left/2))
		defer t.Stop()
		giveUp = t.C
	}
	select {
	case h.sem <- struct{}{}: // a free slot is taken whatever the clock says
	default:
		// A bounded queue: a request that could not get a slot before its
		// deadline anyway is told so at once, and holds no memory meanwhile.
		if h.waiting.Add(1) > int64(waitingPerSlot*cap(h.sem)) {
			h.waiting.Add(-1)
			return errHashBusy
		}
		defer h.waiting.Add(-1)
		select {
		case h.sem <- struct{}{}:
		case <-giveUp:
			return errHashBusy
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return errHashBusy
			}
			return ctx.Err()
		}
	}
	h.mu.Lock()
	h.running++
	h.mu.Unlock()
	h.collecting.Lock()
	if h.dead.Swap(false) {
		h.collect()
	}
	h.collecting.Unlock()
	return nil
}

// put frees the slot. The last hash of a burst hands the memory back
// before its answer goes out (FreeOSMemory takes a few ms), so whatever
// the client sends next meets a process back at its idle size.
func (h *hasher) put() {
	h.dead.Store(true)
	h.mu.Lock()
	h.running--
	idle := h.running == 0
	h.mu.Unlock()
	<-h.sem
	if idle && h.waiting.Load() == 0 {
		h.releasing.Lock()
		h.dead.Store(false) // the release collects first
		h.release()
		h.releasing.Unlock()
	}
}

// derive is Better Auth's recipe: the salt is the 32-char hex string used
// as bytes (not hex-decoded) and the password is NFKC-normalized.
func (h *hasher) derive(ctx context.Context, password, saltHex string) ([]byte, error) {
	if err := h.acquire(ctx); err != nil {
		return nil, err
	}
	defer h.put()
	key, err := scrypt.Key([]byte(norm.NFKC.String(password)), []byte(saltHex), h.params.N, h.params.R, h.params.P, scryptKeyLen)
	if err != nil {
		return nil, fmt.Errorf("scrypt: %w", err)
	}
	return key, nil
}

// hash returns "saltHex:hashHex".
func (h *hasher) hash(ctx context.Context, password string) (string, error) {
	var salt [16]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return "", fmt.Errorf("salt: %w", err)
	}
	saltHex := hex.EncodeToString(salt[:])
	key, err := h.derive(ctx, password, saltHex)
	if err != nil {
		return "", err
	}
	return saltHex + ":" + hex.EncodeToString(key), nil
}

// verify reports whether password matches stored, in constant time.
func (h *hasher) verify(ctx context.Context, password, stored string) (bool, error) {
	saltHex, hashHex, ok := strings.Cut(stored, ":")
	if !ok || saltHex == "" {
		return false, errBadHash
	}
	want, err := hex.DecodeString(hashHex)
	if err != nil || len(want) != scryptKeyLen {
		return false, errBadHash
	}
	got, err := h.derive(ctx, password, saltHex)
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// HashPassword hashes password exactly as sign-up does: Better Auth's
// scrypt format ("saltHex:keyHex", NFKC-normalized password), with cost
// (zero: Better Auth's). It is for tools that set a password outside a
// request, such as "authsidecar users set-password"; it does not check
// the length limits, which are the caller's policy.
func HashPassword(ctx context.Context, password string, cost ScryptParams) (string, error) {
	return newHasher(cost, 1).hash(ctx, password)
}
