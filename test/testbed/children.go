package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ProcessState is one process as /proc/<pid>/stat tells it.
type ProcessState struct {
	PID, PPID int
	Command   string
	State     string // R, S, D, Z (a zombie: exited, not waited for) …
}

func (p ProcessState) String() string {
	return fmt.Sprintf("%d (%s) %s", p.PID, p.Command, p.State)
}

// Children lists the processes whose parent is pid, zombies included.
func Children(pid int) ([]ProcessState, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	var out []ProcessState
	for _, path := range stats {
		p, err := readStat(path)
		if err != nil {
			continue // the process ended meanwhile
		}
		if p.PPID == pid {
			out = append(out, p)
		}
	}
	return out, nil
}

// Alive tells whether the process pid exists and is not a zombie.
func Alive(pid int) bool {
	p, err := readStat(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && p.State != "Z"
}

// readStat reads "pid (comm) state ppid …"; comm may hold spaces and
// parentheses, so it ends at the last ')'.
func readStat(path string) (ProcessState, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return ProcessState{}, err
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return ProcessState{}, fmt.Errorf("%s: unexpected %q", path, s)
	}
	fields := strings.Fields(s[end+1:])
	if len(fields) < 2 {
		return ProcessState{}, fmt.Errorf("%s: unexpected %q", path, s)
	}
	p := ProcessState{Command: s[open+1 : end], State: fields[0]}
	if p.PID, err = strconv.Atoi(strings.TrimSpace(s[:open])); err != nil {
		return ProcessState{}, fmt.Errorf("%s: %w", path, err)
	}
	if p.PPID, err = strconv.Atoi(fields[1]); err != nil {
		return ProcessState{}, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}
