package issuer

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/authsidecar/authsidecar/internal/scrypt"
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

// releaseAfter is how long the hashing memory outlives the last hash: long
// enough that a steady trickle of sign-ins reuses it, short enough that a
// burst's memory is back with the OS within seconds.
const releaseAfter = time.Second

// hasher computes scrypt hashes in Better Auth's format, at most
// slots.n at a time, shared fairly among clients (hashSlots). Each hash
// needs 128*N*r bytes (32 MiB at Better Auth's cost): the hasher keeps at
// most slots.n such buffers and reuses them, so a burst of sign-ins costs
// exactly slots.n x 32 MiB, never a heap of discarded buffers waiting for
// the collector (the buffers live outside the Go heap: see
// internal/scrypt). releaseAfter past the last hash it frees them and
// hands the heap's free pages back to the OS too, so the process returns
// to its idle size.
type hasher struct {
	params ScryptParams
	slots  *hashSlots

	mu      sync.Mutex
	free    []*scrypt.Work // at most slots.n; idle buffers
	running int            // hashes holding a buffer
	gen     int            // bumped by each acquire: a stale release timer does nothing
	release func()         // returns free heap pages to the OS: debug.FreeOSMemory
}

func newHasher(params ScryptParams, concurrency int) *hasher {
	return &hasher{params: params.orDefault(), slots: newHashSlots(concurrency), release: debug.FreeOSMemory}
}

// storeReserve is the part of a request's deadline that waiting for a
// hashing slot leaves to the database work after the hash (a sign-in
// still writes its session): a request that waited in a burst gets a
// clear "busy" rather than a store timeout.
const storeReserve = time.Second

// acquire waits for a hashing slot, in the turn of ctx's client, and
// hands out a buffer for it.
func (h *hasher) acquire(ctx context.Context) (*scrypt.Work, error) {
	var giveUp <-chan time.Time
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		t := time.NewTimer(left - min(storeReserve, left/2))
		defer t.Stop()
		giveUp = t.C
	}
	if err := h.slots.acquire(ctx, hashClient(ctx), giveUp); err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.running++
	h.gen++
	var w *scrypt.Work
	if n := len(h.free); n > 0 {
		w, h.free = h.free[n-1], h.free[:n-1]
	}
	h.mu.Unlock()
	if w == nil {
		var err error
		if w, err = scrypt.NewWork(h.params.N, h.params.R); err != nil {
			h.put(nil)
			return nil, fmt.Errorf("scrypt: %w", err)
		}
	}
	return w, nil
}

// put gives a buffer back and frees the slot. The last hash to end arms the
// release of every buffer.
func (h *hasher) put(w *scrypt.Work) {
	h.mu.Lock()
	if w != nil {
		h.free = append(h.free, w)
	}
	h.running--
	if h.running == 0 {
		gen := h.gen
		time.AfterFunc(releaseAfter, func() { h.drop(gen) })
	}
	h.mu.Unlock()
	h.slots.release()
}

// drop lets the buffers go if no hash started since the timer was armed.
func (h *hasher) drop(gen int) {
	h.mu.Lock()
	if h.running > 0 || h.gen != gen || len(h.free) == 0 {
		h.mu.Unlock()
		return
	}
	for _, w := range h.free {
		w.Free()
	}
	h.free = nil
	h.mu.Unlock()
	h.release()
}

// derive is Better Auth's recipe: the salt is the 32-char hex string used
// as bytes (not hex-decoded) and the password is NFKC-normalized.
func (h *hasher) derive(ctx context.Context, password, saltHex string) ([]byte, error) {
	w, err := h.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer h.put(w)
	key, err := scrypt.Key(w, []byte(norm.NFKC.String(password)), []byte(saltHex), h.params.N, h.params.R, h.params.P, scryptKeyLen)
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
