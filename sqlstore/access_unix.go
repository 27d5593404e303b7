//go:build unix

package sqlstore

import (
	"fmt"
	"os"
	"syscall"
)

// writable reports whether this process may write path (for a directory:
// create files in it). access(2) answers for this process's user without
// opening anything for writing: checking must leave the file system as it
// found it.
func writable(path string) error {
	const w, x = 0x2, 0x1 // W_OK, X_OK
	mode := uint32(w)
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		mode |= x
	}
	if err := syscall.Access(path, mode); err != nil {
		return fmt.Errorf("%s: not writable: %w", path, os.NewSyscallError("access", err))
	}
	return nil
}
