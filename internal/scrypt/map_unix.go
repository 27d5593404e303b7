//go:build unix

package scrypt

import (
	"syscall"
	"unsafe"
)

// mapWords maps n zeroed uint32s of anonymous memory outside the Go heap,
// or falls back to the heap if the mapping fails.
func mapWords(n int) ([]uint32, func()) {
	b, err := syscall.Mmap(-1, 0, 4*n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]uint32, n), nil
	}
	// Pointers never live in this memory, so the collector need not see it.
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b))), n), func() { syscall.Munmap(b) }
}
