package testbed

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process is a child process running in its own process group, with stdout
// and stderr appended to a log file. The kernel kills it when the thread
// that started it dies (Pdeathsig), so it cannot outlive the test binary.
type Process struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the result of cmd.Wait; set before done is closed
}

// StartProcess starts bin with args, logging to logPath.
func StartProcess(name, bin, logPath string, args ...string) (*Process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// PID is the process's id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited returns an error describing the exit if the process has exited,
// and nil while it runs.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); see %s", p.name, p.err, p.log)
	default:
		return nil
	}
}

// Stop sends SIGTERM to the process group, then SIGKILL if the process has
// not exited after grace, and waits for it. It is a no-op once it exited.
// A frozen process is thawed after the SIGTERM, so that it can handle it.
func (p *Process) Stop(grace time.Duration) {
	if !p.signal(syscall.SIGTERM) {
		return
	}
	p.signal(syscall.SIGCONT)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.Kill()
	}
}

// Kill sends SIGKILL to the process group and waits for the process.
func (p *Process) Kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// Freeze stops the process group with SIGSTOP, as a long GC pause, a
// frozen VM or a debugger would: the process keeps its connections and its
// state, and goes on where it stopped when thawed. It is a no-op once the
// process exited.
func (p *Process) Freeze() { p.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen process group with SIGCONT.
func (p *Process) Thaw() { p.signal(syscall.SIGCONT) }

// signal signals the process group unless the process already exited, and
// reports whether it did.
func (p *Process) signal(sig syscall.Signal) bool {
	if p.Exited() != nil {
		return false
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	return true
}

// logTails returns the last n lines of every *.log file in dir, each under
// a header naming the file.
func logTails(dir string, n int) string {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var b strings.Builder
	for _, path := range logs {
		fmt.Fprintf(&b, "==> %s <==\n%s\n", filepath.Base(path), tail(path, n))
	}
	return b.String()
}

// tail returns the last n lines of the file at path, reading at most its
// last 64 KiB.
func tail(path string, n int) string {
	const maxRead = 64 << 10
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxRead {
		_, err = f.Seek(-maxRead, io.SeekEnd)
		if err != nil {
			return err.Error()
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
