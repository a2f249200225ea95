package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/test/testbed"
)

// ucProcess is uc as the bench runs it, and the bench's connection to its
// bus. By default it is `uc run`: one process with an embedded NATS server.
// With -appliers N it is a nats-server and uc's roles as processes against
// it: a dispatcher, a watcher and N appliers. uc's memory and CPU are the
// sums over its processes, the NATS server's included (as `uc run` embeds
// it).
type ucProcess struct {
	procs []*process
	url   string // of its NATS server
	nc    *nats.Conn
	js    jetstream.JetStream
	// replicas names the applier replicas' ids (the values in
	// uc_partitions) by their process's role; nil for uc run.
	replicas map[string]string
	// ports are free ports picked at once for the processes to come, so
	// that no two of them are given the same one.
	ports []int
}

// process is one of uc's processes.
type process struct {
	role string // run; or nats, dispatcher, watcher, applier-1, …
	pid  int
	log  string
	// debug is the URL of uc's metrics and profiles (--metrics-addr with
	// --profiling); empty for the NATS server.
	debug  string
	exited func() error // an error once the process has exited
	stop   func()
}

// startUC starts uc with a fresh JetStream store under e.dir/name and waits
// until its bus is up (and, for separate roles, until the appliers have
// shared out the partitions).
func (e *env) startUC(ctx context.Context, name string) (*ucProcess, error) {
	dir := filepath.Join(e.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	u := &ucProcess{}
	start, n := u.startRun, 2 // uc run: its NATS server and its metrics
	if e.cfg.appliers > 0 {
		start, n = u.startRoles, len(roles(e.cfg.appliers, e.cfg.shards))-1 // each role's metrics
	}
	var err error
	if u.ports, err = testbed.FreePorts(n); err != nil {
		return nil, err
	}
	if err := start(ctx, e, dir); err != nil {
		u.stop()
		return nil, err
	}
	for _, p := range u.procs {
		logf("uc %s started (pid %d, log %s, metrics and profiles %s)", p.role, p.pid, p.log, cmp.Or(p.debug, "–"))
	}
	return u, nil
}

// startRun starts uc run, with its embedded NATS server.
func (u *ucProcess) startRun(ctx context.Context, e *env, dir string) error {
	listen := "127.0.0.1:" + strconv.Itoa(u.port())
	if err := u.start(e, dir, "run", "--nats-listen", listen, "--data-dir", filepath.Join(dir, "data")); err != nil {
		return err
	}
	return u.connect(ctx, "nats://"+listen)
}

// roles are the processes of uc as separate roles with n appliers and
// shards watcher shards (0: one watcher), in the order they start.
func roles(n, shards int) []string {
	out := []string{natsRole, "dispatcher"}
	if shards == 0 {
		out = append(out, "watcher")
	}
	for i := range shards {
		out = append(out, fmt.Sprintf("watcher-%d", i+1))
	}
	for i := range n {
		out = append(out, fmt.Sprintf("applier-%d", i+1))
	}
	return out
}

// natsRole is the NATS server's role among uc's processes.
const natsRole = "nats"

// startRoles starts a nats-server, then uc's dispatcher (which creates the
// streams), one watcher and the appliers against it.
func (u *ucProcess) startRoles(ctx context.Context, e *env, dir string) error {
	srv, err := testbed.StartNATS(ctx, filepath.Join(dir, natsRole), 0)
	if err != nil {
		return err
	}
	if err := u.adoptNATS(srv); err != nil {
		return err
	}
	for _, role := range roles(e.cfg.appliers, e.cfg.shards)[1:] {
		args := []string{"--nats-url", srv.URL()}
		switch {
		case role == "watcher":
			args = append(args, "--leader-elect=false")
		case e.cfg.shards > 0 && strings.HasPrefix(role, "watcher-"):
			args = append(args, "--shard-watchers", "--replica-id", role)
		case e.cfg.shards > 0 && strings.HasPrefix(role, "applier-"):
			args = append(args, "--shard-watchers")
		}
		if err := u.start(e, dir, role, args...); err != nil {
			return err
		}
	}
	if err := u.connect(ctx, srv.URL()); err != nil {
		return err
	}
	if e.cfg.shards > 0 {
		if err := u.awaitShares(ctx, "the watcher shards", e.cfg.shards, bus.WatchersBucket, bus.WatcherPartitionsBucket); err != nil {
			return err
		}
	}
	return u.awaitPartitions(ctx, e.cfg.appliers)
}

// start starts one uc process: `uc <command> args…` with the bench's
// kubeconfig, applier workers, metrics and profiles on a free port, and
// -uc-flag flags, logging to dir/role.log. The command is the role without
// its replica number.
func (u *ucProcess) start(e *env, dir, role string, args ...string) error {
	command, _, _ := strings.Cut(role, "-")
	debug := "127.0.0.1:" + strconv.Itoa(u.port())
	args = slices.Concat([]string{command}, args, []string{
		"--kubeconfig", e.bed.Kubeconfig(),
		"--applier-workers", strconv.Itoa(e.cfg.concurrency),
		"--log-level", "info",
		"--metrics-addr", debug, "--profiling",
	}, e.cfg.ucFlags)
	p, err := startProcess("uc "+role, filepath.Join(dir, role+".log"), e.ucBin, args...)
	if err != nil {
		return err
	}
	p.role, p.debug = role, "http://"+debug
	u.procs = append(u.procs, p)
	return nil
}

// startProcess starts a program in a process group of its own, which dies
// with the bench, logging to log. name names it in errors.
func startProcess(name, log, bin string, args ...string) (*process, error) {
	logFile, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	p := &process{role: name, pid: cmd.Process.Pid, log: log}
	p.exited = func() error {
		select {
		case <-done:
			return fmt.Errorf("%s exited (%v); see %s", name, cmd.ProcessState, log)
		default:
			return nil
		}
	}
	p.stop = func() { terminate(p.pid, done) }
	return p, nil
}

// port takes one of the ports picked for the processes.
func (u *ucProcess) port() int {
	p := u.ports[0]
	u.ports = u.ports[1:]
	return p
}

// terminate stops a process group: SIGTERM, and SIGKILL after ten seconds.
func terminate(pid int, done <-chan struct{}) {
	select {
	case <-done:
		return
	default:
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
	}
}

// adoptNATS makes the test bed's NATS server one of uc's processes. The
// test bed does not tell its pid: it is the bench's only child of that name.
func (u *ucProcess) adoptNATS(srv *testbed.NATSServer) error {
	p := &process{role: natsRole, log: filepath.Join(srv.Dir(), "nats-server.log"), stop: srv.Stop}
	u.procs = append(u.procs, p) // stopped by u.stop whatever follows
	pids, err := childPIDs("nats-server")
	if err != nil {
		return err
	}
	if len(pids) != 1 {
		return fmt.Errorf("found %d nats-server processes started by the bench, want 1", len(pids))
	}
	p.pid = pids[0]
	stat := fmt.Sprintf("/proc/%d/stat", p.pid)
	p.exited = func() error {
		if _, _, _, err := readStat(stat); err != nil {
			return fmt.Errorf("nats-server exited; see %s", p.log)
		}
		return nil
	}
	return nil
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
		u.url, u.nc, u.js = url, nc, js
		return true, nil
	}, nil)
}

// pids maps the pid of each of uc's processes to its role.
func (u *ucProcess) pids() map[int]string {
	out := map[int]string{}
	for _, p := range u.procs {
		out[p.pid] = p.role
	}
	return out
}

// exited returns an error once any of uc's processes has exited.
func (u *ucProcess) exited() error {
	for _, p := range u.procs {
		if err := p.exited(); err != nil {
			return err
		}
	}
	return nil
}

// stop closes the bench's connection, then stops uc's processes, the last
// started first (the NATS server last).
func (u *ucProcess) stop() {
	if u.nc != nil {
		u.nc.Close()
	}
	for _, p := range slices.Backward(u.procs) {
		p.stop()
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

// hookReady waits until at least pullers workers pull the requests of a
// controller's sync hook (an idle worker has one pull waiting), which also
// means uc registered the controller.
func (u *ucProcess) hookReady(ctx context.Context, controller string, pullers int) error {
	return waitFor(ctx, time.Minute, "the hook of "+controller, func(ctx context.Context) (bool, error) {
		if err := u.exited(); err != nil {
			return false, fatalError{err}
		}
		c, err := u.js.Consumer(ctx, bus.RequestStream, bus.HookConsumer(controller, hooks.Sync))
		if err != nil {
			return false, err
		}
		return c.CachedInfo().NumWaiting >= pullers, nil
	}, nil)
}

// memory reads uc's resident set, the sum over its processes, and each
// process's.
func (u *ucProcess) memory() (memory, map[string]memory, error) {
	var total memory
	byRole := map[string]memory{}
	for _, p := range u.procs {
		m, err := readMemory(p.pid)
		if err != nil {
			return total, nil, err
		}
		byRole[p.role] = m
		total.RSS += m.RSS
		total.Peak += m.Peak
	}
	return total, byRole, nil
}

// resetPeaks starts the peak resident set of each of uc's processes again
// from its current one.
func (u *ucProcess) resetPeaks() error {
	for _, p := range u.procs {
		if err := resetPeak(p.pid); err != nil {
			return err
		}
	}
	return nil
}

// idleMemory is uc's memory before it holds any parent: what the phases'
// memory is compared with.
type idleMemory struct {
	RSSMiB  float64 `json:"rssMiB"`
	HeapMiB float64 `json:"heapMiB"`
}

// idleMemory reads uc's resident set and live heap now.
func (u *ucProcess) idleMemory(ctx context.Context) (*idleMemory, error) {
	mem, _, err := u.memory()
	if err != nil {
		return nil, err
	}
	heap, err := u.liveHeap(ctx)
	if err != nil {
		return nil, err
	}
	return &idleMemory{RSSMiB: mib(mem.RSS), HeapMiB: mib(heap)}, nil
}

// liveHeap is the Go heap uc's processes hold once collected: each runs a
// garbage collection (the heap profile's gc=1) and reports HeapAlloc. Unlike
// the resident set, it does not carry the collector's headroom, so it
// resolves what one more controller costs. The NATS server of separate
// roles is not counted.
func (u *ucProcess) liveHeap(ctx context.Context) (int64, error) {
	total, _, err := u.liveHeaps(ctx)
	return total, err
}

// liveHeaps is liveHeap, and each process's by role.
func (u *ucProcess) liveHeaps(ctx context.Context) (int64, map[string]int64, error) {
	var total int64
	byRole := map[string]int64{}
	for _, p := range u.procs {
		if p.debug == "" {
			continue
		}
		n, err := heapAfterGC(ctx, p.debug)
		if err != nil {
			return 0, nil, fmt.Errorf("uc %s: %w", p.role, err)
		}
		total += n
		byRole[p.role] = n
	}
	return total, byRole, nil
}

// saveHeaps writes each process's heap profile, as of its last garbage
// collection, to dir/<label>-<role>-heap.pprof (go tool pprof
// -sample_index=inuse_space): what the live heap is made of.
func (u *ucProcess) saveHeaps(ctx context.Context, dir, label string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, p := range u.procs {
		if p.debug == "" {
			continue
		}
		profile, err := httpProfile(ctx, p.debug+"/debug/pprof/heap")
		if err != nil {
			return fmt.Errorf("uc %s: heap profile: %w", p.role, err)
		}
		if err := os.WriteFile(filepath.Join(dir, label+"-"+p.role+"-heap.pprof"), profile, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// allocated is the bytes uc's processes allocated since they started
// (runtime.MemStats.TotalAlloc, summed; the NATS server of separate roles
// not counted): over a window, the churn the garbage collector pays for,
// steadier from run to run than CPU time on a shared machine.
func (u *ucProcess) allocated(ctx context.Context) (int64, error) {
	var total int64
	for _, p := range u.procs {
		if p.debug == "" {
			continue
		}
		n, err := memStat(ctx, p.debug, "", "TotalAlloc")
		if err != nil {
			return 0, fmt.Errorf("uc %s: %w", p.role, err)
		}
		total += n
	}
	return total, nil
}

// heapAfterGC reads HeapAlloc from a Go process's heap profile, taken
// after a garbage collection.
func heapAfterGC(ctx context.Context, debug string) (int64, error) {
	return memStat(ctx, debug, "gc=1&", "HeapAlloc")
}

// memStat reads one of runtime.MemStats from a Go process's heap profile
// (query: more of the profile's parameters).
func memStat(ctx context.Context, debug, query, name string) (int64, error) {
	profile, err := httpProfile(ctx, debug+"/debug/pprof/heap?"+query+"debug=1")
	if err != nil {
		return 0, fmt.Errorf("heap profile (is --profiling overridden by -uc-flag?): %w", err)
	}
	for line := range strings.Lines(string(profile)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "# "+name+" = "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("heap profile: no %s", name)
}
