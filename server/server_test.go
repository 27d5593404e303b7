package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

func start(t *testing.T, h http.Handler, grace time.Duration) (addr string, stop func() error, drained chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTracker()
	drained = make(chan struct{})
	s := &Server{
		HTTP: &http.Server{Handler: tr.Middleware(h), ReadHeaderTimeout: time.Second}, Listener: ln, Tracker: tr,
		Grace: grace, OnDrain: func() { close(drained) }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return ln.Addr().String(), func() error { cancel(); return <-done }, drained
}

// TestSlowRequestFinishes: shutdown during a slow request lets it finish
// and answer, then Run returns.
func TestSlowRequestFinishes(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	addr, stop, drained := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		fmt.Fprint(w, "done")
	}), 10*time.Second)
	res := make(chan string, 1)
	go func() {
		r, err := http.Get("http://" + addr + "/")
		if err != nil {
			res <- "error: " + err.Error()
			return
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		res <- string(b)
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	<-drained
	select {
	case err := <-stopped:
		t.Fatalf("Run returned (%v) while a request was still running", err)
	default:
	}
	close(release)
	if got := <-res; got != "done" {
		t.Fatalf("got %q, want the slow request to finish", got)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestHijackedClosedAtGraceEnd: a hijacked connection (a WebSocket tunnel)
// is waited for during the grace and closed when it ends; Run returns only
// after its handler has.
func TestHijackedClosedAtGraceEnd(t *testing.T) {
	handlerDone := make(chan struct{})
	addr, stop, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\n\r\n")
		brw.Flush()
		go func() { <-r.Context().Done(); conn.Close() }() // as ReverseProxy does
		io.Copy(io.Discard, conn)
	}), 300*time.Millisecond)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	if line, _ := bufio.NewReader(conn).ReadString('\n'); line != "HTTP/1.1 101 Switching Protocols\r\n" {
		t.Fatalf("got %q", line)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	select {
	case <-handlerDone:
	default:
		t.Fatal("Run returned before the hijacked handler did")
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("tunnel still open after shutdown")
	}
}

// TestEndlessStreamCanceled: a response that never ends is cut at the end
// of the grace instead of holding shutdown forever.
func TestEndlessStreamCanceled(t *testing.T) {
	handlerDone := make(chan struct{})
	addr, stop, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			fmt.Fprint(w, "data: tick\n\n")
			http.NewResponseController(w).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}), 200*time.Millisecond)
	res, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	bufio.NewReader(res.Body).ReadString('\n')
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	select {
	case <-handlerDone:
	default:
		t.Fatal("Run returned before the streaming handler did")
	}
}
