package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/test/testbed"
)

// ucProcess is `uc run` as a child process (so its memory is its own), with
// its embedded NATS server, and the bench's connection to that server.
type ucProcess struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	nc   *nats.Conn
	js   jetstream.JetStream
}

// startUC starts uc run with a fresh JetStream store under e.dir/name and
// waits until its bus is up.
func (e *env) startUC(ctx context.Context, name string) (*ucProcess, error) {
	dir := filepath.Join(e.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := testbed.FreePort()
	if err != nil {
		return nil, err
	}
	listen := "127.0.0.1:" + strconv.Itoa(port)
	args := append([]string{"run",
		"--kubeconfig", e.bed.Kubeconfig(),
		"--nats-listen", listen,
		"--data-dir", filepath.Join(dir, "data"),
		"--applier-workers", strconv.Itoa(e.cfg.concurrency),
		"--log-level", "info",
	}, e.cfg.ucFlags...)
	u := &ucProcess{log: filepath.Join(dir, "uc.log"), done: make(chan struct{})}
	logFile, err := os.Create(u.log)
	if err != nil {
		return nil, err
	}
	u.cmd = exec.Command(e.ucBin, args...)
	u.cmd.Stdout, u.cmd.Stderr = logFile, logFile
	u.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := u.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start uc: %w", err)
	}
	go func() {
		_ = u.cmd.Wait()
		logFile.Close()
		close(u.done)
	}()
	if err := u.connect(ctx, "nats://"+listen); err != nil {
		u.stop()
		return nil, err
	}
	logf("uc started (pid %d, log %s)", u.pid(), u.log)
	return u, nil
}

// connect waits until uc's NATS server serves its streams.
func (u *ucProcess) connect(ctx context.Context, url string) error {
	return waitFor(ctx, time.Minute, "uc's bus", func(ctx context.Context) (bool, error) {
		if err := u.exited(); err != nil {
			return false, fatalError{err}
		}
		nc, err := nats.Connect(url, nats.MaxReconnects(-1))
		if err != nil {
			return false, err
		}
		js, err := jetstream.New(nc)
		if err == nil {
			_, err = js.Stream(ctx, bus.ReplyStream)
		}
		if err != nil {
			nc.Close()
			return false, err
		}
		u.nc, u.js = nc, js
		return true, nil
	}, nil)
}

func (u *ucProcess) pid() int { return u.cmd.Process.Pid }

// exited returns an error once uc has exited.
func (u *ucProcess) exited() error {
	select {
	case <-u.done:
		return fmt.Errorf("uc exited (%v); see %s", u.cmd.ProcessState, u.log)
	default:
		return nil
	}
}

// stop closes the bench's connection, then stops uc: SIGTERM, and SIGKILL
// after ten seconds.
func (u *ucProcess) stop() {
	if u.nc != nil {
		u.nc.Close()
	}
	if u.exited() != nil {
		return
	}
	_ = syscall.Kill(-u.pid(), syscall.SIGTERM)
	select {
	case <-u.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-u.pid(), syscall.SIGKILL)
		<-u.done
	}
}

// drained reports whether nothing waits on the bus: no request for a hook,
// no reply for the applier.
func (u *ucProcess) drained(ctx context.Context) (bool, error) {
	for _, name := range []string{bus.RequestStream, bus.ReplyStream} {
		s, err := u.js.Stream(ctx, name)
		if err != nil {
			return false, err
		}
		if s.CachedInfo().State.Msgs > 0 {
			return false, nil
		}
	}
	return true, nil
}

// quietPeriod is how long uc's bus must stay empty, with no hook call, for
// uc to count as idle. uc has no signal for "nothing left to do" (its
// watcher's queue is internal), so this is the closest outside view.
const quietPeriod = time.Second

// settle waits until uc is idle: nothing on its bus and no hook call for
// quietPeriod, so that a window's counts include the trailing no-op syncs.
func (u *ucProcess) settle(ctx context.Context, hook *countingHook, timeout time.Duration) error {
	calls, since := int64(-1), time.Now()
	return waitFor(ctx, timeout, "uc to go idle", func(ctx context.Context) (bool, error) {
		if err := u.exited(); err != nil {
			return false, fatalError{err}
		}
		drained, err := u.drained(ctx)
		if err != nil {
			return false, err
		}
		if n := hook.calls.Load(); !drained || n != calls {
			calls, since = n, time.Now()
			return false, nil
		}
		return time.Since(since) >= quietPeriod, nil
	}, nil)
}

// hookReady waits until a worker pulls the requests of a controller's sync
// hook, which also means uc registered the controller.
func (u *ucProcess) hookReady(ctx context.Context, controller string) error {
	return waitFor(ctx, time.Minute, "the hook of "+controller, func(ctx context.Context) (bool, error) {
		if err := u.exited(); err != nil {
			return false, fatalError{err}
		}
		c, err := u.js.Consumer(ctx, bus.RequestStream, bus.HookConsumer(controller, hooks.Sync))
		if err != nil {
			return false, err
		}
		return c.CachedInfo().NumWaiting > 0, nil
	}, nil)
}

// memory reads uc's resident set.
func (u *ucProcess) memory() (memory, error) { return readMemory(u.pid()) }
