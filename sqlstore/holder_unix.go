//go:build unix

package sqlstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// SQLite's unix VFS locks byte ranges of the database file: SHARED is a
// read lock on the sharedSize bytes from sharedFirst (just above the 1 GiB
// "pending byte"), and a connection in WAL mode holds it for as long as it
// is open, idle or not.
const (
	sharedFirst = 0x40000000 + 2
	sharedSize  = 510
)

// SQLiteHolder reports whether another process has the SQLite database at
// path open (a sidecar serving from it), and that process's id when the
// system says (0 otherwise). A missing file is held by nobody.
//
// Call it before this process opens the database itself: the probe opens
// and closes its own descriptor on the file, and closing any descriptor
// drops every POSIX lock the process holds on that file, SQLite's
// included.
func SQLiteHolder(path string) (held bool, pid int, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("probe database: %w", err)
	}
	defer f.Close()
	// F_GETLK asks whether a write lock on the range could be taken, and
	// takes nothing; a process's own locks never conflict with it.
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart, Start: sharedFirst, Len: sharedSize}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return false, 0, fmt.Errorf("probe database %s: %w", path, err)
	}
	if lk.Type == syscall.F_UNLCK {
		return false, 0, nil
	}
	return true, max(int(lk.Pid), 0), nil
}
