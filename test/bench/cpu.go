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

// readCPU reads the CPU time of this process and of its children.
func readCPU() (cpuSeconds, error) {
	self := os.Getpid()
	out := cpuSeconds{}
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	for _, path := range stats {
		name, ppid, secs, err := readStat(path)
		if err != nil {
			continue // the process exited meanwhile
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		switch {
		case pid == self:
			out["bench"] += secs
		case ppid == self:
			out[name] += secs
		}
	}
	return out, nil
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
	name = strings.TrimSuffix(s[open+1:closing], "-bin") // uc runs as uc-bin
	return name, ppid, (utime + stime) / clockTicks, nil
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

func (c cpuSeconds) total() float64 {
	var t float64
	for _, v := range c {
		t += v
	}
	return t
}
