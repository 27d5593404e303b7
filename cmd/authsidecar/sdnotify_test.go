//go:build linux

package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// notifyListener plays systemd's end of NOTIFY_SOCKET, with SO_PASSCRED on
// as PID 1 has it, so every message says which process sent it
// (NotifyAccess=main drops messages from any other).
type notifyListener struct {
	t    *testing.T
	conn *net.UnixConn
	path string
}

type notifyMsg struct {
	state string
	pid   int32
}

func listenNotify(t *testing.T) *notifyListener {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	raw, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_PASSCRED, 1)
	}); err != nil || serr != nil {
		t.Fatalf("SO_PASSCRED: %v %v", err, serr)
	}
	return &notifyListener{t: t, conn: conn, path: path}
}

// next returns the next message, or ok=false when none came before deadline.
func (l *notifyListener) next(deadline time.Time) (notifyMsg, bool) {
	l.t.Helper()
	buf, oob := make([]byte, 4096), make([]byte, 1024)
	l.conn.SetReadDeadline(deadline)
	n, oobn, _, _, err := l.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return notifyMsg{}, false
	}
	msg := notifyMsg{state: string(buf[:n]), pid: -1}
	scms, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		l.t.Fatal(err)
	}
	for _, m := range scms {
		if cred, err := syscall.ParseUnixCredentials(&m); err == nil {
			msg.pid = cred.Pid
		}
	}
	return msg, true
}

// TestSystemdNotifyBinary runs the built binary as a Type=notify unit would:
// READY=1 only once both ports answer, WATCHDOG=1 every half of
// WATCHDOG_USEC, STOPPING=1 on SIGTERM, all from the main pid.
func TestSystemdNotifyBinary(t *testing.T) {
	sd := listenNotify(t)
	up := echoUpstream(t)
	dir := t.TempDir()
	port, metricsPort := freePort(t), freePort(t)
	cfg := filepath.Join(dir, "sidecar.yaml")
	writeFile(t, cfg, fmt.Sprintf(`listen: "127.0.0.1:%d"
base_url: "http://127.0.0.1:%d"
upstream: %q
database: { path: %q }
metrics: { listen: "127.0.0.1:%d" }
log: { format: json, level: info }
`, port, port, up.URL, filepath.Join(dir, "auth.db"), metricsPort))
	const watchdog = 200 * time.Millisecond
	p, err := launch(t, cfg, port, "AUTH_SECRET="+e2eSecret, "NOTIFY_SOCKET="+sd.path,
		fmt.Sprintf("WATCHDOG_USEC=%d", watchdog/time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	pid := int32(p.cmd.Process.Pid)
	client := &http.Client{Timeout: 5 * time.Second}

	// Start-up: watchdog pings may come first; READY=1 exactly once.
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, ok := sd.next(deadline)
		if !ok {
			t.Fatalf("no READY=1 within 20s; log:\n%s", p.stderr.String())
		}
		if m.pid != pid {
			t.Fatalf("%q from pid %d, want the main pid %d", m.state, m.pid, pid)
		}
		if m.state == "WATCHDOG=1" {
			continue
		}
		if m.state != "READY=1" {
			t.Fatalf("before READY=1: %q", m.state)
		}
		break
	}
	// Nothing waited on since READY=1: both listeners must answer now.
	res, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", metricsPort))
	if err != nil {
		t.Fatalf("/readyz right after READY=1: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/readyz right after READY=1: %d", res.StatusCode)
	}
	res, err = client.Get(fmt.Sprintf("http://127.0.0.1:%d/api/auth/jwks", port))
	if err != nil {
		t.Fatalf("public port right after READY=1: %v", err)
	}
	res.Body.Close()

	// Running: WATCHDOG=1 every 100ms; nothing else.
	const pings = 4
	start := time.Now()
	for i := range pings {
		m, ok := sd.next(time.Now().Add(2 * watchdog))
		if !ok {
			t.Fatalf("ping %d: none within the %s watchdog timeout", i, 2*watchdog)
		}
		if m.state != "WATCHDOG=1" || m.pid != pid {
			t.Fatalf("ping %d: %q from pid %d", i, m.state, m.pid)
		}
	}
	t.Logf("%d pings in %s (WATCHDOG_USEC=%s)", pings, time.Since(start).Round(time.Millisecond), watchdog)

	// Reload (Type=notify-reload sends SIGHUP): RELOADING=1 with
	// MONOTONIC_USEC, then READY=1, whether the file was applied or
	// refused (the service runs on either way).
	for _, tc := range []struct{ name, file string }{
		{"same file", ""},
		{"invalid file", "bogus_key: 1\n"},
	} {
		if tc.file != "" {
			writeFile(t, cfg, tc.file)
		}
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		var states []string
		for deadline := time.Now().Add(10 * time.Second); len(states) < 2; {
			m, ok := sd.next(deadline)
			if !ok {
				t.Fatalf("%s: after SIGHUP got %q within 10s, want RELOADING=1 then READY=1; log:\n%s", tc.name, states, p.stderr.String())
			}
			if m.state == "WATCHDOG=1" {
				continue
			}
			if m.pid != pid {
				t.Fatalf("%s: %q from pid %d, want the main pid %d", tc.name, m.state, m.pid, pid)
			}
			states = append(states, m.state)
		}
		if !strings.HasPrefix(states[0], "RELOADING=1\nMONOTONIC_USEC=") || states[1] != "READY=1" {
			t.Errorf("%s: after SIGHUP got %q, want RELOADING=1 with MONOTONIC_USEC, then READY=1", tc.name, states)
		}
	}

	// Shutdown: STOPPING=1 on SIGTERM, then a clean exit.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		m, ok := sd.next(deadline)
		if !ok {
			t.Fatalf("no STOPPING=1 within 10s of SIGTERM; log:\n%s", p.stderr.String())
		}
		if m.state == "WATCHDOG=1" {
			continue
		}
		if m.state != "STOPPING=1" || m.pid != pid {
			t.Fatalf("after SIGTERM: %q from pid %d", m.state, m.pid)
		}
		break
	}
	if err := p.stop(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	// No READY=1 (or anything but a last ping) after STOPPING=1.
	for {
		m, ok := sd.next(time.Now().Add(100 * time.Millisecond))
		if !ok {
			break
		}
		if m.state != "WATCHDOG=1" {
			t.Fatalf("after STOPPING=1: %q", m.state)
		}
	}
}

// TestSystemdUnitVerifies runs systemd-analyze verify on the shipped unit,
// with ExecStart pointed at the built binary (verify insists the command
// exists). verify exits 0 even on a misspelt value it ignores, so any
// output at all fails the test.
func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	raw, err := os.ReadFile("../../deploy/systemd/authsidecar.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(raw)
	// The paths deploy/README.md and the unit's install steps use.
	const execStart = "ExecStart=/usr/local/bin/authsidecar serve -config /etc/authsidecar/sidecar.yaml\n"
	for _, want := range []string{execStart, "Type=notify\n", "NotifyAccess=main\n", "WatchdogSec=", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q", strings.TrimSpace(want))
		}
	}
	bin := sidecarBinary(t)
	path := filepath.Join(t.TempDir(), "authsidecar.service")
	writeFile(t, path, strings.Replace(unit, "/usr/local/bin/authsidecar ", bin+" ", 1))
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
