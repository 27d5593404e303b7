package issuer

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

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

// hasher computes scrypt hashes in Better Auth's format, at most cap(sem)
// at a time: each one holds ~128*N*r bytes, so unbounded concurrency would
// let a burst of sign-ins exhaust memory.
type hasher struct {
	params ScryptParams
	sem    chan struct{}
}

func newHasher(params ScryptParams, concurrency int) *hasher {
	return &hasher{params: params.orDefault(), sem: make(chan struct{}, concurrency)}
}

// derive is Better Auth's recipe: the salt is the 32-char hex string used
// as bytes (not hex-decoded) and the password is NFKC-normalized.
func (h *hasher) derive(ctx context.Context, password, saltHex string) ([]byte, error) {
	select {
	case h.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-h.sem }()
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
