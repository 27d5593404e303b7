package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestReadResponse(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want response
		err  error
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello", response{status: 200}, nil},
		{"chunked with trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n", response{status: 200}, nil},
		{"connection close", "HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}", response{status: 401, close: true}, nil},
		{"http/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", response{status: 200, close: true}, nil},
		{"no length reads to EOF", "HTTP/1.1 200 OK\r\n\r\nbody until close", response{status: 200, close: true}, nil},
		{"jwt header", "HTTP/1.1 200 OK\r\nSet-Auth-Jwt: a.b.c\r\nContent-Length: 4\r\n\r\nnull", response{status: 200, jwt: true}, nil},
		{"switching protocols", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", response{status: 101}, nil},
		{"no content", "HTTP/1.1 204 No Content\r\n\r\n", response{status: 204}, nil},
		{"garbage", "SSH-2.0-OpenSSH\r\n\r\n", response{}, errMalformed},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", response{status: 200}, errMalformed},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", response{status: 200}, io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A second response behind the first checks that exactly one
			// was consumed.
			br := bufio.NewReader(strings.NewReader(tc.in + "NEXT"))
			var jwt []byte
			got, err := readResponse(br, &jwt)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if got.jwt != (string(jwt) == "a.b.c") {
				t.Errorf("captured set-auth-jwt %q, want a.b.c exactly when present", jwt)
			}
			if err != nil || got.close {
				return
			}
			if rest, _ := io.ReadAll(br); string(rest) != "NEXT" {
				t.Errorf("left %q unread, want %q", rest, "NEXT")
			}
		})
	}
}

// TestRequests parses what the generator writes with net/http.
func TestRequests(t *testing.T) {
	const host = "127.0.0.1:8080"
	read := func(t *testing.T, b []byte) *http.Request {
		t.Helper()
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(string(b))))
		if err != nil {
			t.Fatalf("ReadRequest(%q): %v", b, err)
		}
		if r.Host != host {
			t.Errorf("Host = %q, want %q", r.Host, host)
		}
		return r
	}
	t.Run("business", func(t *testing.T) {
		r := read(t, appendBusiness(nil, host, "a.b.c"))
		if r.Method != "GET" || r.URL.Path != "/api/tasks" || r.Header.Get("Authorization") != "Bearer a.b.c" {
			t.Errorf("got %s %s Authorization %q", r.Method, r.URL, r.Header.Get("Authorization"))
		}
	})
	t.Run("get-session", func(t *testing.T) {
		r := read(t, appendSession(nil, host, "auth.session_token=abc%2B"))
		if c, err := r.Cookie("auth.session_token"); err != nil || c.Value != "abc%2B" || r.URL.Path != "/api/auth/get-session" {
			t.Errorf("got %s, cookie %v %v", r.URL, c, err)
		}
	})
	t.Run("sign-in", func(t *testing.T) {
		buf := appendSignIn(make([]byte, 0, 8), host, 1234, "pw")
		r := read(t, buf)
		var body struct{ Email, Password string }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		if r.Method != "POST" || body.Email != "user1234@example.com" || body.Password != "pw" {
			t.Errorf("got %s with %+v", r.Method, body)
		}
		if rest, _ := io.ReadAll(r.Body); len(rest) != 0 {
			t.Errorf("Content-Length is short by %d bytes", len(rest))
		}
	})
	t.Run("upgrade", func(t *testing.T) {
		for _, jwt := range []string{"a.b.c", ""} {
			r := read(t, appendUpgrade(nil, host, jwt))
			if r.URL.Path != "/ws/chat" || r.URL.Query().Get("token") != jwt || r.Header.Get("Upgrade") != "websocket" {
				t.Errorf("got %s Upgrade %q", r.URL, r.Header.Get("Upgrade"))
			}
		}
	})
}

func TestContainsFold(t *testing.T) {
	for _, tc := range []struct {
		in, sub string
		want    bool
	}{
		{"close", "close", true},
		{"Keep-Alive, Close", "close", true},
		{"gzip, CHUNKED", "chunked", true},
		{"clos", "close", false},
		{"", "close", false},
	} {
		if got := containsFold([]byte(tc.in), tc.sub); got != tc.want {
			t.Errorf("containsFold(%q, %q) = %t, want %t", tc.in, tc.sub, got, tc.want)
		}
	}
}
