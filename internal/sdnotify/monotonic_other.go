//go:build !linux

package sdnotify

// monotonicUsec: systemd is Linux-only, so elsewhere there is nobody to
// read MONOTONIC_USEC and it is left out.
func monotonicUsec() (int64, bool) { return 0, false }
