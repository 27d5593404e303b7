//go:build linux

package sdnotify

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// systemd is played by a real unixgram socket, bound at a path or in the
// abstract namespace, read the way PID 1 reads it: one datagram per message.

type fakeSystemd struct {
	t    *testing.T
	conn *net.UnixConn
	name string // NOTIFY_SOCKET as systemd would set it
}

func listen(t *testing.T, abstract bool) *fakeSystemd {
	t.Helper()
	name := filepath.Join(t.TempDir(), "notify")
	if abstract {
		name = fmt.Sprintf("@authsidecar-sdnotify-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen %s: %v", name, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &fakeSystemd{t: t, conn: conn, name: name}
}

// next returns the next datagram, failing the test after d.
func (s *fakeSystemd) next(d time.Duration) string {
	s.t.Helper()
	msg, err := s.read(d)
	if err != nil {
		s.t.Fatalf("no message within %s: %v", d, err)
	}
	return msg
}

func (s *fakeSystemd) read(d time.Duration) (string, error) {
	buf := make([]byte, 4096)
	s.conn.SetReadDeadline(time.Now().Add(d))
	n, err := s.conn.Read(buf)
	return string(buf[:n]), err
}

func (s *fakeSystemd) env(kv ...string) func(string) string {
	m := map[string]string{"NOTIFY_SOCKET": s.name}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestStates(t *testing.T) {
	for _, tc := range []struct {
		name     string
		abstract bool
	}{
		{"path socket", false},
		{"abstract socket", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sd := listen(t, tc.abstract)
			n := New(sd.env(), os.Getpid(), nil)
			if !n.Enabled() {
				t.Fatal("Enabled() = false with NOTIFY_SOCKET set")
			}
			n.Ready()
			if got := sd.next(time.Second); got != "READY=1" {
				t.Fatalf("Ready sent %q", got)
			}

			before, _ := monotonicUsec()
			n.Reloading()
			got := sd.next(time.Second)
			after, _ := monotonicUsec()
			state, usec, ok := strings.Cut(got, "\nMONOTONIC_USEC=")
			if !ok || state != "RELOADING=1" {
				t.Fatalf("Reloading sent %q, want RELOADING=1\\nMONOTONIC_USEC=...", got)
			}
			us, err := strconv.ParseInt(usec, 10, 64)
			if err != nil || us < before || us > after {
				t.Fatalf("MONOTONIC_USEC=%s, want a CLOCK_MONOTONIC time in [%d, %d]", usec, before, after)
			}
			n.Ready()
			if got := sd.next(time.Second); got != "READY=1" {
				t.Fatalf("Ready after Reloading sent %q", got)
			}

			n.Stopping()
			if got := sd.next(time.Second); got != "STOPPING=1" {
				t.Fatalf("Stopping sent %q", got)
			}
			// A start-up cut short by SIGTERM still reaches its Ready call.
			n.Ready()
			n.Send("MARK=1")
			if got := sd.next(time.Second); got != "MARK=1" {
				t.Fatalf("Ready after Stopping sent %q, want nothing", got)
			}
		})
	}
}

// TestMonotonicIsBootClock: MONOTONIC_USEC is CLOCK_MONOTONIC, which counts
// from boot, not Unix time (a wall-clock value would be ~1.7e15 µs).
func TestMonotonicIsBootClock(t *testing.T) {
	raw, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Skip("no /proc/uptime:", err)
	}
	up, err := strconv.ParseFloat(strings.Fields(string(raw))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	us, ok := monotonicUsec()
	// CLOCK_BOOTTIME (uptime) includes suspend; CLOCK_MONOTONIC does not.
	if !ok || us <= 0 || float64(us) > (up+1)*1e6 {
		t.Fatalf("monotonicUsec() = %d, %v; uptime %.2fs", us, ok, up)
	}
}

func TestNoSocket(t *testing.T) {
	for _, tc := range []struct {
		name, sock string
		warns      bool
	}{
		{"unset", "", false},
		{"vsock", "vsock:2:1234", true},
		{"relative path", "notify.sock", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logBuf bytes.Buffer
			env := map[string]string{"NOTIFY_SOCKET": tc.sock, "WATCHDOG_USEC": "1000"}
			n := New(func(k string) string { return env[k] }, os.Getpid(), slog.New(slog.NewTextHandler(&logBuf, nil)))
			if n.Enabled() || n.WatchdogInterval() != 0 {
				t.Fatalf("Enabled() = %v, WatchdogInterval() = %s; want off", n.Enabled(), n.WatchdogInterval())
			}
			n.Ready()
			n.Stopping()
			n.Reloading()
			if err := n.Send("READY=1"); err != nil {
				t.Fatalf("Send: %v", err)
			}
			done := make(chan struct{})
			go func() { n.Watchdog(context.Background()); close(done) }()
			select {
			case <-done:
			case <-time.After(time.Second):
				t.Fatal("Watchdog did not return at once without a socket")
			}
			if warned := strings.Contains(logBuf.String(), "unsupported NOTIFY_SOCKET"); warned != tc.warns {
				t.Fatalf("warned = %v, want %v; log:\n%s", warned, tc.warns, logBuf.String())
			}
		})
	}
}

// TestSendFailureIsLogged: systemd gone (socket removed) is a warning, not a
// crash or a hang.
func TestSendFailureIsLogged(t *testing.T) {
	var logBuf bytes.Buffer
	env := map[string]string{"NOTIFY_SOCKET": filepath.Join(t.TempDir(), "gone")}
	n := New(func(k string) string { return env[k] }, os.Getpid(), slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err := n.Send("READY=1"); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("Send to a missing socket: %v, want an error naming it", err)
	}
	n.Ready()
	if !strings.Contains(logBuf.String(), "sd_notify failed") || !strings.Contains(logBuf.String(), `state="READY=1"`) {
		t.Fatalf("log:\n%s", logBuf.String())
	}
}

func TestWatchdogInterval(t *testing.T) {
	pid := os.Getpid()
	for _, tc := range []struct {
		name      string
		usec, wpd string
		want      time.Duration
		warns     bool
	}{
		{"unset", "", "", 0, false},
		{"set", "200000", "", 200 * time.Millisecond, false},
		{"for us", "30000000", strconv.Itoa(pid), 30 * time.Second, false},
		{"for another process", "200000", strconv.Itoa(pid + 1), 0, false},
		{"bad pid", "200000", "main", 0, true},
		{"zero", "0", "", 0, true},
		{"negative", "-5", "", 0, true},
		{"not a number", "30s", "", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logBuf bytes.Buffer
			env := map[string]string{"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": tc.usec, "WATCHDOG_PID": tc.wpd}
			n := New(func(k string) string { return env[k] }, pid, slog.New(slog.NewTextHandler(&logBuf, nil)))
			if got := n.WatchdogInterval(); got != tc.want {
				t.Fatalf("WatchdogInterval() = %s, want %s", got, tc.want)
			}
			if warned := strings.Contains(logBuf.String(), "watchdog off"); warned != tc.warns {
				t.Fatalf("warned = %v, want %v; log:\n%s", warned, tc.warns, logBuf.String())
			}
		})
	}
}

// TestWatchdogPings: WATCHDOG=1 at once, then every half interval, until
// the context ends.
func TestWatchdogPings(t *testing.T) {
	sd := listen(t, false)
	const timeout = 200 * time.Millisecond
	n := New(sd.env("WATCHDOG_USEC", strconv.Itoa(int(timeout/time.Microsecond))), os.Getpid(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { n.Watchdog(ctx) })
	start := time.Now()
	const pings = 5
	for i := range pings {
		if got := sd.next(time.Second); got != "WATCHDOG=1" {
			t.Fatalf("ping %d: %q", i, got)
		}
	}
	// Four half-intervals after the first ping, never faster; pinging only
	// every full interval would take 800ms and risk systemd's timeout.
	if el := time.Since(start); el < (pings-1)*timeout/2-10*time.Millisecond || el >= (pings-1)*timeout {
		t.Fatalf("%d pings took %s, want about %s", pings, el, (pings-1)*timeout/2)
	}
	cancel()
	// Returning is the proof it stopped: only Watchdog sends pings.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Watchdog still running a second after its context ended")
	}
}
