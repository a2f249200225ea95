package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// memory is a process's resident set, in bytes.
type memory struct {
	RSS  int64 // VmRSS: now
	Peak int64 // VmHWM: the most since the last resetPeak (or the start)
}

// readMemory reads /proc/<pid>/status.
func readMemory(pid int) (memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	defer f.Close()
	var m memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch key {
		case "VmRSS":
			m.RSS, err = kiB(val)
		case "VmHWM":
			m.Peak, err = kiB(val)
		}
		if err != nil {
			return m, fmt.Errorf("/proc/%d/status %s: %w", pid, key, err)
		}
	}
	return m, sc.Err()
}

func kiB(field string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(field), " kB"), 10, 64)
	return n << 10, err
}

// resetPeak makes VmHWM start again from the current RSS, so the peak of
// one phase can be read on its own.
func resetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }
