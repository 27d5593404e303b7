package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/authsidecar/authsidecar/internal/sdnotify"
	"github.com/authsidecar/authsidecar/sidecar"
)

// cmdServe runs the sidecar until SIGINT or SIGTERM; SIGHUP reloads the
// config file. Under systemd (Type=notify) it reports READY=1 once both
// listeners are bound and the keys loaded, RELOADING=1 around each
// reload, STOPPING=1 when the signal arrives, and pings the watchdog.
func cmdServe(ctx context.Context, e *cliEnv, args []string) error {
	if err := noArgs("serve", args); err != nil {
		return err
	}
	// Caught from the start: SIGHUP's default action ends the process,
	// and systemd may send it (ExecReload) as soon as the unit is up.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	cfg, secret, hash, err := sidecar.LoadConfig(e.configPath, e.getenv)
	if err != nil {
		return err
	}
	// sd_notify's own problems (a bad NOTIFY_SOCKET) go to stderr: the
	// sidecar's log is not open yet and is batched once it is.
	sd := sdnotify.New(e.getenv, os.Getpid(), sidecar.NewLogger(cfg.Log, e.stderr))
	s, err := sidecar.New(ctx, sidecar.Options{
		Config: cfg, Secret: secret, Getenv: e.getenv, Log: e.stderr,
		ConfigPath: e.configPath, ConfigHash: hash,
		OnReady: sd.Ready, OnReloading: sd.Reloading,
	})
	if err != nil {
		return err
	}
	stopped := make(chan struct{})
	stopNotify := context.AfterFunc(ctx, func() { defer close(stopped); sd.Stopping() })
	// AfterFunc runs Stopping in its own goroutine: wait for it, or an
	// idle sidecar could exit before STOPPING=1 is sent.
	defer func() {
		if !stopNotify() {
			<-stopped
		}
	}()
	// The watchdog pings until Run returns, not until the signal: the
	// drain (shutdown.grace) must not look like a hang.
	wctx, stopWatchdog := context.WithCancel(context.Background())
	watchdogDone := make(chan struct{})
	go func() { defer close(watchdogDone); sd.Watchdog(wctx) }()
	defer func() { stopWatchdog(); <-watchdogDone }()
	hupDone := make(chan struct{})
	go func() {
		defer close(hupDone)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				s.Reload() // logged and counted; the old config stays on error
			}
		}
	}()
	defer func() { <-hupDone }()
	return s.Run(ctx)
}
