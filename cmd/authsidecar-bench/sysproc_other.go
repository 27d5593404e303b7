//go:build !linux

package main

import "syscall"

// childAttr: without Linux's Pdeathsig, children of the upstream and bare
// modes still exit when their stdin (a pipe from the benchmark) closes.
func childAttr() *syscall.SysProcAttr { return nil }
