//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package proxy

import (
	"net"
	"syscall"
)

// connAliveCheck: connAlive can tell, so conns may keep connections.
const connAliveCheck = true

// connAlive reports whether an idle connection is still open with
// nothing to read: a peek that would block. Bytes there were not asked
// for (a body longer than its Content-Length, say), and read as the next
// request's answer they would be another request's; an end of file is
// the upstream closing it. The Transport learns both from the reader it
// parks on every idle connection; this is one non-blocking recv(2).
func connAlive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Would block: nothing there. A byte, or 0 bytes (the end), or an
		// error: not reusable.
		alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && alive
}
