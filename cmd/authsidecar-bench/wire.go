package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
)

// The load generator speaks HTTP/1.1 itself: requests are appended into a
// reused buffer and responses are parsed in place from a bufio.Reader, so
// a request costs the generator no allocation and a few microseconds,
// several times less than net/http's client. On a 2-core machine shared
// with both proxies and the upstream, that CPU is the benchmark's noise.

// response is what the load generator needs from one HTTP/1.1 response.
type response struct {
	status int
	close  bool // the server will close the connection after it
	jwt    bool // it carried a non-empty set-auth-jwt header
}

var errMalformed = errors.New("malformed HTTP response")

const (
	maxHeaderLines = 100
	maxChunks      = 1 << 16
	maxUntilClose  = 1 << 20 // body without length or chunking: read to EOF, at most this
)

var (
	hdrContentLength    = []byte("content-length")
	hdrTransferEncoding = []byte("transfer-encoding")
	hdrConnection       = []byte("connection")
	hdrSetAuthJWT       = []byte("set-auth-jwt")
	httpPrefix          = []byte("HTTP/1.")
)

// readResponse reads one response's head and discards its body. After a
// 101 the connection is a tunnel and nothing more is read. When jwt is not
// nil, the set-auth-jwt value is copied into it (setup only).
func readResponse(br *bufio.Reader, jwt *[]byte) (response, error) {
	var r response
	line, err := br.ReadSlice('\n')
	if err != nil {
		return r, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, httpPrefix) || line[8] != ' ' {
		return r, errMalformed
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return r, errMalformed
		}
		r.status = r.status*10 + int(c-'0')
	}
	r.close = line[7] == '0' // HTTP/1.0
	contentLength, chunked := int64(-1), false
	for i := 0; ; i++ {
		if i == maxHeaderLines {
			return r, errMalformed
		}
		if line, err = br.ReadSlice('\n'); err != nil {
			return r, err
		}
		if len(line) <= 2 && len(bytes.TrimSpace(line)) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return r, errMalformed
		}
		name, val := line[:colon], bytes.TrimSpace(line[colon+1:])
		switch {
		case bytes.EqualFold(name, hdrContentLength):
			n, ok := parseDecimal(val)
			if !ok {
				return r, errMalformed
			}
			contentLength = n
		case bytes.EqualFold(name, hdrTransferEncoding):
			chunked = containsFold(val, "chunked")
		case bytes.EqualFold(name, hdrConnection):
			r.close = r.close || containsFold(val, "close")
		case bytes.EqualFold(name, hdrSetAuthJWT):
			r.jwt = len(val) > 0
			if jwt != nil {
				*jwt = append((*jwt)[:0], val...)
			}
		}
	}
	switch {
	case r.status == 101:
		return r, nil
	case r.status < 200:
		return r, errMalformed // we never send Expect: no other 1xx is due
	case r.status == 204 || r.status == 304:
		return r, nil
	case chunked:
		return r, discardChunked(br)
	case contentLength >= 0:
		_, err = br.Discard(int(contentLength))
		return r, err
	default:
		r.close = true
		n, err := io.Copy(io.Discard, io.LimitReader(br, maxUntilClose+1))
		if err == nil && n > maxUntilClose {
			err = errMalformed
		}
		return r, err
	}
}

func discardChunked(br *bufio.Reader) error {
	for range maxChunks {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		size, ok := parseChunkSize(line)
		if !ok {
			return errMalformed
		}
		if size == 0 {
			for range maxHeaderLines { // trailers, then an empty line
				if line, err = br.ReadSlice('\n'); err != nil {
					return err
				}
				if len(bytes.TrimSpace(line)) == 0 {
					return nil
				}
			}
			return errMalformed
		}
		if _, err := br.Discard(int(size)); err != nil {
			return err
		}
		if line, err = br.ReadSlice('\n'); err != nil {
			return err
		}
		if len(bytes.TrimSpace(line)) != 0 {
			return errMalformed
		}
	}
	return errMalformed
}

func parseDecimal(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// parseChunkSize reads the hex size at the start of a chunk line,
// ignoring extensions after ';'.
func parseChunkSize(line []byte) (int64, bool) {
	var n int64
	digits := 0
	for _, c := range line {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return n, digits > 0 && (c == ';' || c == '\r' || c == '\n' || c == ' ')
		}
		if digits++; digits > 12 {
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	return 0, false
}

// containsFold reports whether b contains sub (lower-case ASCII),
// ignoring ASCII case, without allocating.
func containsFold(b []byte, sub string) bool {
	for i := 0; i+len(sub) <= len(b); i++ {
		j := 0
		for ; j < len(sub); j++ {
			c := b[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				break
			}
		}
		if j == len(sub) {
			return true
		}
	}
	return false
}

// Requests, appended to b[:0]. host is the target's 127.0.0.1:PORT.

const userAgent = "\r\nUser-Agent: authsidecar-bench\r\n"

// appendBusiness: GET /api/tasks with a Bearer token.
func appendBusiness(b []byte, host, jwt string) []byte {
	b = append(b[:0], "GET /api/tasks HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nAuthorization: Bearer "...)
	b = append(b, jwt...)
	b = append(b, userAgent...)
	return append(b, "\r\n"...)
}

// appendSession: GET /api/auth/get-session with the session cookie.
func appendSession(b []byte, host, cookie string) []byte {
	b = append(b[:0], "GET /api/auth/get-session HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nCookie: "...)
	b = append(b, cookie...)
	b = append(b, userAgent...)
	return append(b, "\r\n"...)
}

// appendSignIn: POST /api/auth/sign-in/email for user<i>@example.com.
func appendSignIn(b []byte, host string, i int, password string) []byte {
	var num [20]byte
	digits := strconv.AppendInt(num[:0], int64(i), 10)
	const pre, mid, post = `{"email":"user`, `@example.com","password":"`, `"}`
	n := len(pre) + len(digits) + len(mid) + len(password) + len(post)
	b = append(b[:0], "POST /api/auth/sign-in/email HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, userAgent...)
	b = append(b, "\r\n"+pre...)
	b = append(b, digits...)
	b = append(b, mid...)
	b = append(b, password...)
	return append(b, post...)
}

// appendUpgrade: a WebSocket handshake on /ws/chat, with ?token= unless
// jwt is empty.
func appendUpgrade(b []byte, host, jwt string) []byte {
	b = append(b[:0], "GET /ws/chat"...)
	if jwt != "" {
		b = append(b, "?token="...)
		b = append(b, jwt...)
	}
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="...)
	b = append(b, userAgent...)
	return append(b, "\r\n"...)
}
