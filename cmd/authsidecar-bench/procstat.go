package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat.
// sysconf(_SC_CLK_TCK) would say so, but needs cgo; Linux fixes it at 100
// on every architecture Go supports.
const clockTicks = 100

// cpuTicks is the process's user+system CPU time, all threads, in clock
// ticks (fields 14 and 15 of /proc/PID/stat, proc(5)).
func cpuTicks(pid int) (uint64, error) {
	st, err := readStat(pid)
	return st.ticks, err
}

// procStat is what the benchmark reads from /proc/PID/stat.
type procStat struct {
	comm       string // field 2, without the parentheses
	ppid       int    // field 4
	ticks      uint64 // utime+stime, fields 14 and 15
	childTicks uint64 // cutime+cstime, fields 16 and 17: its reaped children's
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	open, i := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || i < open {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var v [5]uint64 // ppid utime stime cutime cstime
	for j, k := range []int{1, 11, 12, 13, 14} {
		if v[j], err = strconv.ParseUint(f[k], 10, 64); err != nil {
			return procStat{}, fmt.Errorf("/proc/%d/stat: field %d: %w", pid, k+3, err)
		}
	}
	return procStat{comm: string(b[open+1 : i]), ppid: int(v[0]), ticks: v[1] + v[2], childTicks: v[3] + v[4]}, nil
}

// allStats reads /proc/PID/stat of every process it can see (processes
// that exit while it reads are left out).
func allStats() (map[int]procStat, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := make(map[int]procStat, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil {
			out[pid] = st
		}
	}
	return out, nil
}

// childNamed is the pid of parent's first child whose command is comm, or
// 0.
func childNamed(parent int, comm string) int {
	all, err := allStats()
	if err != nil {
		return 0
	}
	best := 0
	for pid, st := range all {
		if st.ppid == parent && st.comm == comm && (best == 0 || pid < best) {
			best = pid
		}
	}
	return best
}

// treeTicks is the CPU time of root and all its descendants, those that
// exited and were reaped included (cutime+cstime), in clock ticks: a
// PostgreSQL server is a postmaster and one process per connection.
func treeTicks(root int) (uint64, error) {
	all, err := allStats()
	if err != nil {
		return 0, err
	}
	if _, ok := all[root]; !ok {
		return 0, fmt.Errorf("process %d is gone", root)
	}
	children := map[int][]int{}
	for pid, st := range all {
		children[st.ppid] = append(children[st.ppid], pid)
	}
	var n uint64
	for stack := []int{root}; len(stack) > 0; {
		pid := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n += all[pid].ticks + all[pid].childTicks
		stack = append(stack, children[pid]...)
	}
	return n, nil
}

// machineTicks reads the first line of /proc/stat, which counts every
// process on the kernel, other containers' too, in clock ticks: time in
// processes (user, nice, system: comparable to the utime+stime of our
// own), all time, and time stolen by the hypervisor.
func machineTicks() (process, total, steal uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var v [8]uint64 // user nice system idle iowait irq softirq steal
	for i := range v {
		if v[i], err = strconv.ParseUint(f[i+1], 10, 64); err != nil {
			return 0, 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
	}
	for _, x := range v {
		total += x
	}
	return v[0] + v[1] + v[2], total, v[7], nil
}

// memKiB returns VmRSS (resident now) and VmHWM (the peak resident size
// since the process started or since resetPeakRSS) in KiB.
func memKiB(pid int) (rss, hwm uint64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, name, err)
		}
		if name == "VmRSS" {
			rss = n
		} else {
			hwm = n
		}
	}
	return rss, hwm, sc.Err()
}

// resetPeakRSS sets VmHWM back to the current RSS ("5" into clear_refs,
// Linux 4.0+), so the next reading is the peak of one run rather than of
// the process's life (which includes the sign-up burst).
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// machine names the computer the numbers come from.
type machine struct {
	CPU    string `json:"cpu"`
	NumCPU int    `json:"nproc"`
	Go     string `json:"go"`
	Kernel string `json:"kernel"`
	OSArch string `json:"os_arch"`
	MemMiB uint64 `json:"mem_mib"`
}

func describeMachine() machine {
	m := machine{CPU: "unknown", NumCPU: runtime.NumCPU(), Go: runtime.Version(), Kernel: "unknown",
		OSArch: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if name, val, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
				m.CPU = strings.TrimSpace(val)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				m.MemMiB = kb / 1024
			}
		}
	}
	return m
}
