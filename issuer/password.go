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
	rtmetrics "runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/authsidecar/authsidecar/internal/gcfloor"
	"github.com/authsidecar/authsidecar/passhash"
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

// errRefusedHash: the stored value is of no format passhash reads, not
// well formed, or beyond its cost bounds (the reason is wrapped).
var errRefusedHash = errors.New("stored password hash refused")

// errHashBusy: the request's deadline (less storeReserve) passed while it
// waited for a free hashing slot. It is overload, not a failure: 503 with Retry-After.
var errHashBusy = errors.New("password hashing: every slot busy until the request deadline")

// hasher computes scrypt hashes in Better Auth's format, at most slots.n
// at a time, shared fairly among clients (hashSlots). golang.org/x/crypto/scrypt allocates its work memory,
// 128*N*r bytes (32 MiB at Better Auth's cost), on every call and leaves
// it to the garbage collector, whose next cycle may be a whole heap goal
// away: a burst of sign-ins would pile up dead buffers (150 MiB of RSS
// after a handful). These steps keep it to one buffer per slot, and to
// none soon after the sign-ins stop:
//
//   - before a hash starts, if another one ended and no collection has
//     run since, the collector runs, so the new buffer takes the dead
//     one's pages instead of growing the heap;
//   - while a hash runs, the collector's goal counts its buffer
//     (gcfloor.Expect): allocating 32 MiB on a heap whose goal is a few
//     MiB would start a collection that frees nothing and, to scan the
//     hashing goroutine's stack, has to stop it;
//   - when a burst that ran hashes side by side ends (the last hash ends
//     and none is waiting), the heap's free pages go back to the OS
//     (debug.FreeOSMemory, a few ms) before that sign-in is answered:
//     requests arriving right after the burst do not stack their memory
//     on top of its buffers;
//   - a lone hash's buffer stays for linger, still counted in the goal, for
//     the next sign-in of a trickle to reuse (handed back at once, its
//     8,192 pages would be faulted in again by the next one), and then
//     goes back the same way;
//   - the new buffer reuses the dead one's pages only if nothing took
//     some of them first: other goroutines allocating between the
//     collection and the hash's allocation (a burst's waiting sign-ins,
//     answered together when their deadlines pass) can leave no 32 MiB in
//     one piece, and the heap then grows by a buffer while the dead one's
//     pages stay resident. So a burst sets a soft memory limit
//     (limitBurst), under which the runtime hands free pages back before
//     paging new ones in; and once a hash has allocated, a look at the
//     heap's free pages says whether the dead buffer's are still there,
//     and if so they go back to the OS (checkFragment; the common case
//     costs two reads of runtime metrics).
type hasher struct {
	params ScryptParams
	slots  *hashSlots
	linger time.Duration

	// collecting serializes the check for a dead buffer and the
	// collection, so that two hashes starting together both wait for it.
	collecting sync.Mutex
	collect    func()                          // runtime.GC
	cycles     func() uint64                   // collections completed so far
	release    func()                          // collects and returns free heap pages to the OS: debug.FreeOSMemory
	releasing  sync.Mutex                      // one release at a time
	heap       func() (allocated, free uint64) // bytes allocated so far; free heap pages not returned to the OS
	ready      func() uint64                   // bytes of memory the runtime holds ready (resident or about to be)
	setLimit   func(int64) int64               // debug.SetMemoryLimit
	burstLimit int64                           // the memory limit in force before the burst set one; 0: none set
	checkAfter time.Duration                   // when the fragment check first looks

	// nativeTook is how long the sidecar's own hash takes here, in ns: a
	// moving average of the last ones' computing time (slot wait not
	// counted). A foreign hash that computes faster is padded to it.
	nativeTook atomic.Int64

	mu      sync.Mutex
	running int  // hashes holding a slot
	wide    bool // this burst has run more than one hash at once
	// lingering: a lone hash's buffer waits for the next sign-in; the
	// collector's goal still counts it (gcfloor.Expect).
	lingering   bool
	lingerBytes int64     // the lingering buffer's size
	wideEnd     time.Time // when the last burst that ran hashes side by side ended
	dead        bool      // a buffer died at deadAt completed collections and may still be on the heap
	deadAt      uint64
	gen         int // bumped by each acquire: a lingering buffer's release is called off
}

// linger is how long a lone hash's buffer waits for the next sign-in: a
// trickle of sign-ins a second apart reuses it. burstTail: a hash that
// starts within it of a burst's end belongs to the burst.
const (
	linger    = time.Second
	burstTail = 50 * time.Millisecond
)

func newHasher(params ScryptParams, concurrency int) *hasher {
	return &hasher{params: params.orDefault(), slots: newHashSlots(concurrency), linger: linger,
		collect: runtime.GC, cycles: gcCycles, release: debug.FreeOSMemory, heap: heapFree, checkAfter: fragmentCheck,
		ready: readyMemory, setLimit: debug.SetMemoryLimit}
}

// fragmentCheck is when the check for a dead buffer's pages left beside
// the new one first looks: a hash allocates within microseconds of
// starting, unless its goroutine waits for a CPU.
const fragmentCheck = 5 * time.Millisecond

// readyMemory reads the memory the runtime has mapped and not returned
// to the OS: what its memory limit counts.
func readyMemory() uint64 {
	s := []rtmetrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

// burstHeadroom is what a burst's memory limit allows beyond the memory
// in use when a hash starts and its buffer: the heap's growth until the
// next hash starts (the waiting requests' connections among it).
const burstHeadroom = 16 << 20

// heapFree reads the bytes allocated so far and the heap's free pages
// that were not returned to the OS.
func heapFree() (allocated, free uint64) {
	s := []rtmetrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// gcCycles reads the number of completed collections.
func gcCycles() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

// storeReserve is the part of a request's deadline that waiting for a
// hashing slot leaves to the database work after the hash (a sign-in
// still writes its session): a request that waited in a burst gets a
// clear "busy" rather than a store timeout.
const storeReserve = time.Second

// work is one hash's claim on the hashing: the slots it holds and the
// work memory it allocates.
type work struct {
	slots int
	bytes int64
}

// native is the sidecar's own hash: one slot, one buffer.
func (h *hasher) native() work { return work{slots: 1, bytes: h.bufBytes()} }

// foreign is what a hash of another system's format claims: a slot for
// each native buffer's worth of memory it needs and for each thread it
// computes on (argon2's p), at least one and at most every slot. So the
// hashes running at once never hold more memory than the slots' native
// buffers, whatever their formats, except one that needs more than all
// of them: it runs alone, within passhash's bound (256 MiB).
func (h *hasher) foreign(c passhash.Cost) work {
	unit := max(h.bufBytes(), 1)
	n := max(1, c.Threads, int((c.Memory+unit-1)/unit))
	return work{slots: min(n, h.slots.n), bytes: c.Memory}
}

// acquire waits for a hashing slot, in the turn of ctx's client; put
// gives it back.
func (h *hasher) acquire(ctx context.Context) error { return h.acquireWork(ctx, h.native()) }

// acquireWork waits for w's slots; putWork(w) gives them back. The steps
// that keep memory to one buffer per slot apply to w's buffer.
func (h *hasher) acquireWork(ctx context.Context, w work) error {
	var giveUp <-chan time.Time
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		t := time.NewTimer(left - min(storeReserve, left/2))
		defer t.Stop()
		giveUp = t.C
	}
	if err := h.slots.acquireN(ctx, hashClient(ctx), giveUp, w.slots); err != nil {
		return err
	}
	if w.bytes < bigBuffer {
		return nil
	}
	h.mu.Lock()
	h.running++
	h.gen++
	// A hash starting right after a burst ended is its tail (a client's
	// sign-in after its sign-up): released at once like the burst.
	h.wide = h.wide || h.running > 1 || h.running == 1 && time.Since(h.wideEnd) < burstTail
	// The goal already counts the lingering buffer.
	reused := int64(0)
	if h.lingering {
		reused = h.lingerBytes
	}
	h.lingering = false
	h.mu.Unlock()
	h.collecting.Lock()
	defer h.collecting.Unlock()
	h.mu.Lock()
	// A collection that started after the buffer died has freed it: the
	// one under way when it died may not have (cycles counts completed
	// ones), the one after it has.
	stale := h.dead && h.cycles() < h.deadAt+2
	h.dead = false
	h.mu.Unlock()
	if stale {
		h.collect()
	}
	// Whether this collection freed the dead buffer or an earlier one
	// did, its pages are free now; look once the hash has allocated.
	allocated, free := h.heap()
	h.mu.Lock()
	if h.wide {
		h.limitBurst(h.ready(), free, w.bytes)
	}
	h.mu.Unlock()
	time.AfterFunc(h.checkAfter, func() { h.checkFragment(allocated, free, 10, w.bytes) })
	if d := w.bytes - reused; d != 0 {
		gcfloor.Expect(d, true)
	}
	return nil
}

// checkFragment runs once the hash that followed a collection has
// allocated its buffer of buf bytes (the heap has allocated a buffer's worth since
// allocated0, right after the collection, when free0 of its pages were
// free and resident; it takes up to tries looks, checkAfter apart, to see
// that). A buffer taken from the free pages leaves about a buffer fewer
// of them; if most of them are still free, the new buffer came from
// fresh memory beside the dead one's pages, which go back to the OS.
func (h *hasher) checkFragment(allocated0, free0 uint64, tries int, bufBytes int64) {
	allocated, free := h.heap()
	buf := uint64(bufBytes)
	if allocated-allocated0 < buf {
		if tries > 1 {
			time.AfterFunc(h.checkAfter, func() { h.checkFragment(allocated0, free0, tries-1, bufBytes) })
		}
		return
	}
	if free+buf/2 > free0 && free >= buf/2 {
		h.releaseMemory()
	}
}

// bufBytes is one hash's work memory: 128 x N x r.
func (h *hasher) bufBytes() int64 { return 128 * int64(h.params.N) * int64(h.params.R) }

// bigBuffer: below the runtime's smallest heap goal (4 MiB), a hash's
// buffer is ordinary garbage the collector's pace handles (the cheap
// costs tests use); the steps above are for Better Auth's 32 MiB.
const bigBuffer = 4 << 20

// put frees the slot. The end of a burst that ran hashes side by side
// hands the memory back before its answer goes out, so whatever the
// client sends next meets a process back at its idle size; a lone hash's
// buffer lingers for the next sign-in.
func (h *hasher) put() { h.putWork(h.native()) }

// putWork frees w's slots, as put does.
func (h *hasher) putWork(w work) {
	if w.bytes < bigBuffer {
		h.slots.releaseN(w.slots)
		return
	}
	h.mu.Lock()
	h.running--
	h.dead, h.deadAt = true, h.cycles()
	idle, wide, gen := h.running == 0, h.wide, h.gen
	lone := idle && !wide
	if idle {
		h.wide = false
		h.unlimitBurst()
	}
	h.lingering, h.lingerBytes = lone, w.bytes
	h.mu.Unlock()
	if !lone {
		// Within a burst the next hash collects before it starts, and
		// retunes; at its end the goal comes down at once.
		gcfloor.Expect(-w.bytes, idle)
	}
	h.slots.releaseN(w.slots)
	switch {
	case !idle || h.slots.queued() > 0 && !lone:
	case wide:
		h.mu.Lock()
		h.wideEnd = time.Now()
		h.mu.Unlock()
		h.releaseMemory()
	default:
		// The heap goal still counts the buffer, so the collector keeps
		// its pages (and the runtime does not hand them back) for the next
		// sign-in; the requests meanwhile may use them as headroom.
		time.AfterFunc(h.linger, func() {
			h.mu.Lock()
			still := h.gen == gen && h.lingering
			h.lingering = h.lingering && !still
			h.mu.Unlock()
			if still {
				gcfloor.Expect(-w.bytes, true)
				h.releaseMemory()
			}
		})
	}
}

// limitBurst sets a soft memory limit as each hash of a burst that runs
// hashes side by side starts (h.mu held): the memory in use (ready, less
// the heap's free pages, the dead buffer's among them), the new buffer,
// and some headroom. It is not there to make the collector run (the
// buffers hold no pointers, and the goal counts them already) but for the
// runtime's own rule that an allocation paging memory in past the limit
// first returns free pages to the OS: a new buffer that could not take
// the dead one's pages (fragmented by other goroutines' allocations
// between the collection and the hash) then costs no resident memory
// beyond the bound, without waiting for the fragment check. (Set once
// from the memory ready when the burst began, the limit counted the
// waiting connections twice and a third buffer fit under it:
// TestMemoryBounded saw 33 MiB of such free pages under a loaded CI.) A
// lower limit already in force (GOMEMLIMIT) stays. buf is the new
// buffer's size.
func (h *hasher) limitBurst(ready, free uint64, buf int64) {
	inUse := ready
	if free < ready { // two reads, not one snapshot
		inUse -= free
	}
	limit := int64(inUse) + buf + burstHeadroom
	if h.burstLimit == 0 {
		prior := h.setLimit(-1)
		if prior <= limit {
			return
		}
		h.burstLimit = prior
	}
	h.setLimit(min(limit, h.burstLimit))
}

// unlimitBurst puts back the limit in force before the burst (h.mu held).
func (h *hasher) unlimitBurst() {
	if h.burstLimit != 0 {
		h.setLimit(h.burstLimit)
		h.burstLimit = 0
	}
}

// releaseMemory collects the dead buffers and returns the heap's free
// pages to the OS.
func (h *hasher) releaseMemory() {
	h.releasing.Lock()
	defer h.releasing.Unlock()
	h.mu.Lock()
	h.dead = false
	h.mu.Unlock()
	h.release()
}

// derive is Better Auth's recipe: the salt is the 32-char hex string used
// as bytes (not hex-decoded) and the password is NFKC-normalized.
func (h *hasher) derive(ctx context.Context, password, saltHex string) ([]byte, error) {
	if err := h.acquire(ctx); err != nil {
		return nil, err
	}
	defer h.put()
	began := time.Now()
	key, err := scrypt.Key([]byte(norm.NFKC.String(password)), []byte(saltHex), h.params.N, h.params.R, h.params.P, scryptKeyLen)
	if err != nil {
		return nil, fmt.Errorf("scrypt: %w", err)
	}
	h.tookNative(time.Since(began))
	return key, nil
}

// tookNative adds a native hash's computing time to nativeTook's
// average (an eighth of the way to it).
func (h *hasher) tookNative(d time.Duration) {
	for {
		old := h.nativeTook.Load()
		next := int64(d)
		if old != 0 {
			next = old + (next-old)/8
		}
		if h.nativeTook.CompareAndSwap(old, next) {
			return
		}
	}
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

// verify reports whether password matches stored, in constant time,
// whatever stored's format.
func (h *hasher) verify(ctx context.Context, password, stored string) (bool, error) {
	ok, _, err := h.check(ctx, password, stored)
	return ok, err
}

// check reports whether password matches stored, and whether stored is
// of a foreign format (passhash): one the sign-in replaces with the
// sidecar's own once the password is proven. A stored value passhash
// refuses is errRefusedHash, with the reason, and costs no hash. Weak
// formats are read: the import is where they are allowed or not.
func (h *hasher) check(ctx context.Context, password, stored string) (ok, foreign bool, err error) {
	ph, err := passhash.Parse(stored, passhash.Options{AllowWeak: true})
	if err != nil {
		return false, false, fmt.Errorf("%w: %w", errRefusedHash, err)
	}
	if ph.Format().Native() {
		saltHex, hashHex, _ := strings.Cut(stored, ":")
		want, _ := hex.DecodeString(hashHex) // passhash checked it
		got, err := h.derive(ctx, password, saltHex)
		if err != nil {
			return false, false, err
		}
		return subtle.ConstantTimeCompare(got, want) == 1, false, nil
	}
	ok, err = h.verifyForeign(ctx, password, ph)
	return ok, true, err
}

// verifyForeign verifies a foreign hash in the hashing slots its cost
// claims (foreign), then, if it computed faster than the sidecar's own
// hash does, waits out the difference (outside the slots): a wrong
// password on an imported account with a cheap hash takes as long as an
// unknown address (the dummy hash) or a native account does. A dearer
// hash is not shortened: docs/migration.md says what that tells.
func (h *hasher) verifyForeign(ctx context.Context, password string, ph passhash.Hash) (bool, error) {
	w := h.foreign(ph.Cost())
	if err := h.acquireWork(ctx, w); err != nil {
		return false, err
	}
	began := time.Now()
	ok := ph.Verify(password)
	took := time.Since(began)
	h.putWork(w)
	if pad := time.Duration(h.nativeTook.Load()) - took; pad > 0 {
		t := time.NewTimer(pad)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return ok, nil
}

// HashPassword hashes password exactly as sign-up does: Better Auth's
// scrypt format ("saltHex:keyHex", NFKC-normalized password), with cost
// (zero: Better Auth's). It is for tools that set a password outside a
// request, such as "authsidecar users set-password"; it does not check
// the length limits, which are the caller's policy.
func HashPassword(ctx context.Context, password string, cost ScryptParams) (string, error) {
	return newHasher(cost, 1).hash(ctx, password)
}
