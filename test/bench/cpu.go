package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// cpuSeconds is CPU time (user + system) by process: this one (the driver
// and the in-process hook) and each of its children (the test bed's
// components and uc), by command name. On a machine of two cores they share,
// it shows where a phase's time goes.
type cpuSeconds map[string]float64

// machineKey is the CPU time of the whole machine, every process included:
// what the bench's processes did not use of it was used by others sharing
// the machine, which slows a phase down without showing anywhere else.
const machineKey = "machine"

// apiserver is the kube-apiserver's command name.
const apiserver = "kube-apiserver"

// readCPU reads the CPU time of this process and of its children. uc's
// processes, given by pid with their roles, count as uc's whatever their
// binaries' names; byRole is their CPU time by role.
func readCPU(uc map[int]string) (all, byRole cpuSeconds, err error) {
	all, byRole = cpuSeconds{}, cpuSeconds{}
	if all[machineKey], err = machineBusy(); err != nil {
		return nil, nil, err
	}
	err = eachProcess(func(pid, ppid int, name string, secs float64) {
		role, ours := uc[pid]
		switch {
		case pid == os.Getpid():
			all["bench"] += secs
		case ours:
			all["uc"] += secs
			byRole[role] += secs
		case ppid == os.Getpid():
			all[name] += secs
		}
	})
	return all, byRole, err
}

// childPIDs lists the bench's child processes of a command name.
func childPIDs(name string) ([]int, error) {
	var pids []int
	err := eachProcess(func(pid, ppid int, n string, _ float64) {
		if ppid == os.Getpid() && n == name {
			pids = append(pids, pid)
		}
	})
	return pids, err
}

// eachProcess calls fn with every process's pid, parent, command name and
// CPU seconds.
func eachProcess(fn func(pid, ppid int, name string, secs float64)) error {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return err
	}
	for _, path := range stats {
		name, ppid, secs, err := readStat(path)
		if err != nil {
			continue // the process exited meanwhile
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		fn(pid, ppid, name, secs)
	}
	return nil
}

// machineBusy is the CPU seconds all CPUs spent busy since boot, from the
// first line of /proc/stat: user nice system idle iowait irq softirq steal.
func machineBusy() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: malformed")
	}
	var ticks float64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		ticks += n
	}
	return ticks / clockTicks, nil
}

// readStat reads a process's command name, parent and CPU seconds.
func readStat(path string) (name string, ppid int, secs float64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, 0, err
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", 0, 0, fmt.Errorf("%s: malformed", path)
	}
	// After the name: state ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime stime …
	f := strings.Fields(s[closing+1:])
	if len(f) < 13 {
		return "", 0, 0, fmt.Errorf("%s: malformed", path)
	}
	ppid, _ = strconv.Atoi(f[1])
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return s[open+1 : closing], ppid, (utime + stime) / clockTicks, nil
}

func (c cpuSeconds) minus(o cpuSeconds) cpuSeconds {
	out := cpuSeconds{}
	for k, v := range c {
		if d := v - o[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// ours is the CPU seconds of the bench's processes.
func (c cpuSeconds) ours() float64 {
	var t float64
	for k, v := range c {
		if k != machineKey {
			t += v
		}
	}
	return t
}

// foreign is the CPU seconds of the processes that are not the bench's.
func (c cpuSeconds) foreign() float64 { return max(c[machineKey]-c.ours(), 0) }
