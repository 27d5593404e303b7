// Package sdnotify tells systemd how the service is doing: the sd_notify
// protocol of a Type=notify unit (READY=1, STOPPING=1, RELOADING=1,
// WATCHDOG=1), spoken over the NOTIFY_SOCKET datagram socket without cgo
// or libsystemd.
//
// Outside systemd (NOTIFY_SOCKET unset) every method does nothing. A failed
// send is logged, never fatal: the service serves the same with or without
// its supervisor hearing about it.
package sdnotify

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"
)

// Notifier sends state changes to systemd. The zero value and a Notifier
// made without NOTIFY_SOCKET send nothing.
type Notifier struct {
	// addr is the socket systemd listens on; nil: not under systemd.
	addr *net.UnixAddr
	// watchdog is WATCHDOG_USEC when it is meant for this process; zero: off.
	watchdog time.Duration
	log      *slog.Logger
	// stopping drops a READY=1 that would follow STOPPING=1 (a start-up
	// cancelled by SIGTERM finishes its start-up path): systemd must not
	// see a stopping service claim it is ready again.
	stopping atomic.Bool
}

// New reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID through getenv.
// pid is this process's (os.Getpid()): the watchdog variables name the
// process they are for, and a child that inherited them must not ping on
// its parent's behalf. The variables are left set, as sd_notify does by
// default. log receives problems; nil: slog.Default().
func New(getenv func(string) string, pid int, log *slog.Logger) *Notifier {
	if log == nil {
		log = slog.Default()
	}
	n := &Notifier{log: log}
	sock := getenv("NOTIFY_SOCKET")
	switch {
	case sock == "":
		return n
	case sock[0] == '/' || sock[0] == '@':
		// A leading '@' names a Linux abstract socket; the net package
		// turns it into the leading NUL byte the kernel expects.
		n.addr = &net.UnixAddr{Name: sock, Net: "unixgram"}
	default:
		// systemd 254+ can also hand out vsock: addresses (for VMs);
		// not supported here, and not fatal.
		log.Warn("sd_notify: unsupported NOTIFY_SOCKET address: not notifying systemd", "notify_socket", sock)
		return n
	}
	if d, err := watchdogInterval(getenv, pid); err != nil {
		log.Warn("sd_notify: watchdog off", "err", err)
	} else {
		n.watchdog = d
	}
	return n
}

// watchdogInterval is WATCHDOG_USEC as a duration, zero when unset or meant
// for another process.
func watchdogInterval(getenv func(string) string, pid int) (time.Duration, error) {
	usec := getenv("WATCHDOG_USEC")
	if usec == "" {
		return 0, nil
	}
	if p := getenv("WATCHDOG_PID"); p != "" {
		wpid, err := strconv.Atoi(p)
		if err != nil {
			return 0, fmt.Errorf("WATCHDOG_PID %q: %w", p, err)
		}
		if wpid != pid {
			return 0, nil
		}
	}
	us, err := strconv.ParseInt(usec, 10, 64)
	if err != nil || us <= 0 {
		return 0, fmt.Errorf("WATCHDOG_USEC %q: want a positive number of microseconds", usec)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// Enabled reports whether NOTIFY_SOCKET named a socket to notify.
func (n *Notifier) Enabled() bool { return n.addr != nil }

// WatchdogInterval is the watchdog timeout systemd set for this process
// (WatchdogSec=), zero when there is none.
func (n *Notifier) WatchdogInterval() time.Duration { return n.watchdog }

// Ready sends READY=1: start-up is complete (and, after Reloading, the
// reload is). Dropped after Stopping.
func (n *Notifier) Ready() {
	if n.stopping.Load() {
		return
	}
	n.notify("READY=1")
}

// Stopping sends STOPPING=1: shutdown has begun.
func (n *Notifier) Stopping() {
	n.stopping.Store(true)
	n.notify("STOPPING=1")
}

// Reloading sends RELOADING=1 with MONOTONIC_USEC, the CLOCK_MONOTONIC time
// in microseconds that Type=notify-reload requires to tell this reload from
// an earlier one; call Ready when the reload is done.
func (n *Notifier) Reloading() {
	state := "RELOADING=1"
	if us, ok := monotonicUsec(); ok {
		state += "\nMONOTONIC_USEC=" + strconv.FormatInt(us, 10)
	}
	n.notify(state)
}

// Watchdog sends WATCHDOG=1 every half of WatchdogInterval, as sd_watchdog_enabled
// advises, until ctx ends; it returns at once when there is no watchdog. It
// proves the process is scheduled and not wedged, nothing more.
func (n *Notifier) Watchdog(ctx context.Context) {
	if n.addr == nil || n.watchdog <= 0 {
		return
	}
	tick := time.NewTicker(n.watchdog / 2)
	defer tick.Stop()
	for {
		n.notify("WATCHDOG=1")
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// notify sends one state and logs a failure.
func (n *Notifier) notify(state string) {
	if n.addr == nil {
		return
	}
	if err := n.Send(state); err != nil {
		n.log.Warn("sd_notify failed", "state", state, "err", err)
	}
}

// Send sends state (newline-separated VAR=value lines) as one datagram.
// Without NOTIFY_SOCKET it does nothing and returns nil.
func (n *Notifier) Send(state string) error {
	if n.addr == nil {
		return nil
	}
	// A fresh unbound socket per message, as sd_notify does: nothing to
	// keep open or reconnect if systemd re-creates its socket (daemon-
	// reexec), and messages are rare (the watchdog's are seconds apart).
	// systemd identifies the sender by SCM_CREDENTIALS, which the kernel
	// attaches to the datagram: NotifyAccess=main sees our pid.
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	return nil
}
