//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package proxy

import "net"

// connAliveCheck: without a non-blocking peek, conns cannot tell a
// connection that is safe to reuse, and leaves every request to the
// Transport.
const connAliveCheck = false

func connAlive(net.Conn) bool { return false }
