package main

import "syscall"

// childAttr makes the kernel kill a child if the benchmark dies without
// cleaning up (kill -9, a crash): no orphan keeps a port or a CPU busy.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
