// Package scrypt is scrypt (RFC 7914) with work memory the caller owns.
//
// golang.org/x/crypto/scrypt allocates 128 x N x r bytes (32 MiB at Better
// Auth's cost) on every call and gives it to the garbage collector. A
// sidecar hashing a burst of sign-ins then holds a heap the size of every
// hash since the last collection, and the collector's goal grows with it:
// 150 MiB of RSS after a handful of sign-ins. Here the caller passes the
// memory in, so a fixed set of buffers (one per concurrent hash) serves
// every hash, and the caller decides when to let it go.
//
// The mixing functions below are golang.org/x/crypto/scrypt's, unchanged
// (Copyright 2012 The Go Authors, BSD-style license: see
// https://go.googlesource.com/crypto/+/refs/heads/master/LICENSE). The
// tests check Key against that package and RFC 7914's vectors.
package scrypt

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/bits"
)

const maxInt = int(^uint(0) >> 1)

func blockCopy(dst, src []uint32, n int) {
	copy(dst, src[:n])
}

// blockXOR XORs numbers from dst with n numbers from src.
func blockXOR(dst, src []uint32, n int) {
	for i, v := range src[:n] {
		dst[i] ^= v
	}
}

// salsaXOR applies Salsa20/8 to the XOR of 16 numbers from tmp and in,
// and puts the result into both tmp and out.
func salsaXOR(tmp *[16]uint32, in, out []uint32) {
	w0 := tmp[0] ^ in[0]
	w1 := tmp[1] ^ in[1]
	w2 := tmp[2] ^ in[2]
	w3 := tmp[3] ^ in[3]
	w4 := tmp[4] ^ in[4]
	w5 := tmp[5] ^ in[5]
	w6 := tmp[6] ^ in[6]
	w7 := tmp[7] ^ in[7]
	w8 := tmp[8] ^ in[8]
	w9 := tmp[9] ^ in[9]
	w10 := tmp[10] ^ in[10]
	w11 := tmp[11] ^ in[11]
	w12 := tmp[12] ^ in[12]
	w13 := tmp[13] ^ in[13]
	w14 := tmp[14] ^ in[14]
	w15 := tmp[15] ^ in[15]

	x0, x1, x2, x3, x4, x5, x6, x7, x8 := w0, w1, w2, w3, w4, w5, w6, w7, w8
	x9, x10, x11, x12, x13, x14, x15 := w9, w10, w11, w12, w13, w14, w15

	for i := 0; i < 8; i += 2 {
		x4 ^= bits.RotateLeft32(x0+x12, 7)
		x8 ^= bits.RotateLeft32(x4+x0, 9)
		x12 ^= bits.RotateLeft32(x8+x4, 13)
		x0 ^= bits.RotateLeft32(x12+x8, 18)

		x9 ^= bits.RotateLeft32(x5+x1, 7)
		x13 ^= bits.RotateLeft32(x9+x5, 9)
		x1 ^= bits.RotateLeft32(x13+x9, 13)
		x5 ^= bits.RotateLeft32(x1+x13, 18)

		x14 ^= bits.RotateLeft32(x10+x6, 7)
		x2 ^= bits.RotateLeft32(x14+x10, 9)
		x6 ^= bits.RotateLeft32(x2+x14, 13)
		x10 ^= bits.RotateLeft32(x6+x2, 18)

		x3 ^= bits.RotateLeft32(x15+x11, 7)
		x7 ^= bits.RotateLeft32(x3+x15, 9)
		x11 ^= bits.RotateLeft32(x7+x3, 13)
		x15 ^= bits.RotateLeft32(x11+x7, 18)

		x1 ^= bits.RotateLeft32(x0+x3, 7)
		x2 ^= bits.RotateLeft32(x1+x0, 9)
		x3 ^= bits.RotateLeft32(x2+x1, 13)
		x0 ^= bits.RotateLeft32(x3+x2, 18)

		x6 ^= bits.RotateLeft32(x5+x4, 7)
		x7 ^= bits.RotateLeft32(x6+x5, 9)
		x4 ^= bits.RotateLeft32(x7+x6, 13)
		x5 ^= bits.RotateLeft32(x4+x7, 18)

		x11 ^= bits.RotateLeft32(x10+x9, 7)
		x8 ^= bits.RotateLeft32(x11+x10, 9)
		x9 ^= bits.RotateLeft32(x8+x11, 13)
		x10 ^= bits.RotateLeft32(x9+x8, 18)

		x12 ^= bits.RotateLeft32(x15+x14, 7)
		x13 ^= bits.RotateLeft32(x12+x15, 9)
		x14 ^= bits.RotateLeft32(x13+x12, 13)
		x15 ^= bits.RotateLeft32(x14+x13, 18)
	}
	x0 += w0
	x1 += w1
	x2 += w2
	x3 += w3
	x4 += w4
	x5 += w5
	x6 += w6
	x7 += w7
	x8 += w8
	x9 += w9
	x10 += w10
	x11 += w11
	x12 += w12
	x13 += w13
	x14 += w14
	x15 += w15

	out[0], tmp[0] = x0, x0
	out[1], tmp[1] = x1, x1
	out[2], tmp[2] = x2, x2
	out[3], tmp[3] = x3, x3
	out[4], tmp[4] = x4, x4
	out[5], tmp[5] = x5, x5
	out[6], tmp[6] = x6, x6
	out[7], tmp[7] = x7, x7
	out[8], tmp[8] = x8, x8
	out[9], tmp[9] = x9, x9
	out[10], tmp[10] = x10, x10
	out[11], tmp[11] = x11, x11
	out[12], tmp[12] = x12, x12
	out[13], tmp[13] = x13, x13
	out[14], tmp[14] = x14, x14
	out[15], tmp[15] = x15, x15
}

func blockMix(tmp *[16]uint32, in, out []uint32, r int) {
	blockCopy(tmp[:], in[(2*r-1)*16:], 16)
	for i := 0; i < 2*r; i += 2 {
		salsaXOR(tmp, in[i*16:], out[i*8:])
		salsaXOR(tmp, in[i*16+16:], out[i*8+r*16:])
	}
}

func integer(b []uint32, r int) uint64 {
	j := (2*r - 1) * 16
	return uint64(b[j]) | uint64(b[j+1])<<32
}

func smix(b []byte, r, N int, v, xy []uint32) {
	var tmp [16]uint32
	R := 32 * r
	x := xy
	y := xy[R:]

	j := 0
	for i := 0; i < R; i++ {
		x[i] = binary.LittleEndian.Uint32(b[j:])
		j += 4
	}
	for i := 0; i < N; i += 2 {
		blockCopy(v[i*R:], x, R)
		blockMix(&tmp, x, y, r)

		blockCopy(v[(i+1)*R:], y, R)
		blockMix(&tmp, y, x, r)
	}
	for i := 0; i < N; i += 2 {
		j := int(integer(x, r) & uint64(N-1))
		blockXOR(x, v[j*R:], R)
		blockMix(&tmp, x, y, r)

		j = int(integer(y, r) & uint64(N-1))
		blockXOR(y, v[j*R:], R)
		blockMix(&tmp, y, x, r)
	}
	j = 0
	for _, v := range x[:R] {
		binary.LittleEndian.PutUint32(b[j:], v)
		j += 4
	}
}

// Work is the memory one Key computation needs; reuse it across calls
// with the same N and r (never at the same time), and Free it when done.
//
// The big part is mapped outside the Go heap where the system allows it:
// the collector neither scans it nor counts it toward its next goal (32 MiB
// of live hash memory would otherwise let 32 MiB of garbage pile up before
// a collection), and Free gives it back to the OS at once.
type Work struct {
	v, xy []uint32
	n, r  int
	unmap func() // nil: v is ordinary heap memory
}

// NewWork allocates the memory for cost N, r: 128 x N x r + 256 x r bytes.
func NewWork(N, r int) (*Work, error) {
	if err := check(N, r, 1); err != nil {
		return nil, err
	}
	v, unmap := mapWords(32 * N * r)
	return &Work{v: v, xy: make([]uint32, 64*r), n: N, r: r, unmap: unmap}, nil
}

// Bytes is the memory w holds.
func (w *Work) Bytes() int { return 4 * (len(w.v) + len(w.xy)) }

// Free releases w's memory; w must not be used after. Safe on nil and
// twice.
func (w *Work) Free() {
	if w == nil || w.v == nil {
		return
	}
	if w.unmap != nil {
		w.unmap()
	}
	w.v, w.xy, w.unmap = nil, nil, nil
}

func check(N, r, p int) error {
	if N <= 1 || N&(N-1) != 0 {
		return errors.New("scrypt: N must be > 1 and a power of 2")
	}
	if r <= 0 || p <= 0 {
		return errors.New("scrypt: parameters must be > 0")
	}
	if uint64(r)*uint64(p) >= 1<<30 || r > maxInt/128/p || r > maxInt/256 || N > maxInt/128/r {
		return errors.New("scrypt: parameters are too large")
	}
	return nil
}

// Key derives a keyLen-byte key from password and salt with cost N, r, p
// using w's memory, which must have been made for the same N and r. The
// result equals golang.org/x/crypto/scrypt.Key's. The memory is not
// cleared between calls: smix writes every word of it before reading it.
func Key(w *Work, password, salt []byte, N, r, p, keyLen int) ([]byte, error) {
	if err := check(N, r, p); err != nil {
		return nil, err
	}
	if w == nil || w.v == nil || w.n != N || w.r != r {
		return nil, errors.New("scrypt: work memory freed or made for another cost")
	}
	b, err := pbkdf2.Key(sha256.New, string(password), salt, 1, p*128*r)
	if err != nil {
		return nil, err
	}
	for i := 0; i < p; i++ {
		smix(b[i*128*r:], r, N, w.v, w.xy)
	}
	return pbkdf2.Key(sha256.New, string(password), b, 1, keyLen)
}
