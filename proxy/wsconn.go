package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// wsClientConn is the hijacked client connection. Reads first drain what
// the server had already buffered past the upgrade request (ReverseProxy
// would drop it, and the frame tracker must see every byte). It hides
// TCPConn's ReadFrom and WriteTo so every byte goes through Read and
// Write.
type wsClientConn struct {
	net.Conn
	t  *wsTunnel
	br *bufio.Reader
}

func (c *wsClientConn) Read(p []byte) (int, error) {
	c.t.start()
	var n int
	var err error
	if c.br != nil && c.br.Buffered() > 0 {
		n, err = c.br.Read(p[:min(len(p), c.br.Buffered())])
	} else {
		n, err = c.Conn.Read(p)
	}
	if err != nil {
		c.t.ended(&c.t.toUpstream)
	}
	return n, err
}

func (c *wsClientConn) Write(p []byte) (int, error) {
	c.t.start()
	return c.t.toClient.forward(p)
}

func (c *wsClientConn) Close() error {
	c.t.stop()
	return c.Conn.Close()
}

// CloseWrite passes the upstream's end of stream on, as ReverseProxy does
// with a TCP connection.
func (c *wsClientConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoCloseWrite
}

var errNoCloseWrite = &net.OpError{Op: "close write", Err: http.ErrNotSupported}

// wsUpstreamConn is the upstream's side of the tunnel (the 101 response's
// body).
type wsUpstreamConn struct {
	rwc io.ReadWriteCloser
	t   *wsTunnel
}

func (u *wsUpstreamConn) Read(p []byte) (int, error) {
	u.t.start()
	n, err := u.rwc.Read(p)
	if err != nil {
		u.t.ended(&u.t.toClient)
	}
	return n, err
}

func (u *wsUpstreamConn) Write(p []byte) (int, error) {
	u.t.start()
	return u.t.toUpstream.forward(p)
}

// Close is how ReverseProxy ends the tunnel: when a copy loop returns, or
// when the request is canceled (shutdown at the end of the grace).
func (u *wsUpstreamConn) Close() error {
	u.t.stop()
	return u.rwc.Close()
}
