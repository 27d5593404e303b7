package sidecar

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSlowClientKeys: the proxy keys against slow clients reach the
// running sidecar. A body trickled below proxy.body_min_rate is answered
// 408 once proxy.body_rate_grace is spent; with upstream_max_conns 4 and
// upstream_client_share 25%, a client holding one upstream connection
// gets 503 for a second request, at once.
func TestSlowClientKeys(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			held.Add(1)
			<-release
		}
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"ok":true}`))
	}))
	defer up.Close()
	defer close(release) // before the sidecar's shutdown waits for the held request
	s := runSidecar(t, func(dir string) string {
		return fmt.Sprintf(`listen: 127.0.0.1:0
upstream: %q
database: { path: %q }
metrics: { listen: 127.0.0.1:0 }
proxy: { upstream_max_conns: 4, upstream_client_share: 25%%, body_min_rate: 1KiB/s, body_rate_grace: 1s, body_buffer: 1024 }
`, up.URL, filepath.Join(dir, "auth.db"))
	}, nil)
	addr := s.Addr().String()

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n\r\n")
	go func() {
		for range 100000 {
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("trickled body: no answer: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Errorf("trickled body: got %d, want 408", res.StatusCode)
	}

	go http.Get("http://" + addr + "/hold")
	for deadline := time.Now().Add(10 * time.Second); held.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the held request never reached the upstream")
		}
	}
	res, err = http.Get("http://" + addr + "/fast")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 503 || res.Header.Get("Retry-After") != "1" || !strings.Contains(string(b), "SERVICE_UNAVAILABLE") {
		t.Errorf("second request of a client holding its share: got %d %s, want 503 with Retry-After", res.StatusCode, b)
	}
}
