package sdnotify

import (
	"syscall"
	"unsafe"
)

// clockMonotonic is CLOCK_MONOTONIC from <time.h>.
const clockMonotonic = 1

// monotonicUsec reads CLOCK_MONOTONIC, the clock systemd compares
// MONOTONIC_USEC against. Go's time.Now carries a monotonic reading but
// never exposes its absolute value, and the syscall package has no
// clock_gettime wrapper; golang.org/x/sys would be a new direct dependency
// for one call.
func monotonicUsec() (int64, bool) {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return int64(ts.Sec)*1_000_000 + int64(ts.Nsec)/1_000, true
}
