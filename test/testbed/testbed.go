// Package testbed runs a real Kubernetes control plane on the loopback
// interface for integration tests, benchmarks and local experiments: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler as separate
// processes, plus kwok, which simulates one node (NodeName) whose pods become
// Ready without running containers. It also runs standalone NATS servers
// (StartNATS) that tests can kill and restart, and a workload's containers
// as local processes with what a kubelet would give them (StartContainer,
// ContainerEnv, MountVolumes), since kwok runs none.
//
// The binaries come from a cache that hack/testbed-bins.sh fills
// ($UC_TESTBED_DIR, default ~/.cache/uc-testbed); when something is missing
// the package runs that script, which takes minutes the first time.
//
// Every component picks free ports, so test beds can run side by side. The
// child processes die with the process that started them.
package testbed

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// startTimeout bounds how long Start waits for the components to become
// ready, after the binaries are available.
const startTimeout = 3 * time.Minute

// stopGrace is how long a component may take to exit after SIGTERM.
const stopGrace = 10 * time.Second

// Options configures Start.
type Options struct {
	// Dir is the work directory holding data, credentials, configs and a
	// log file per component. It is created if missing and should be empty.
	// Default: a new temporary directory that Stop removes.
	Dir string
	// Logf receives progress messages. Default: slog.Default at level Info.
	Logf func(format string, args ...any)
}

// Bed is a running test bed. Its methods are safe for concurrent use.
type Bed struct {
	dir        string
	ownDir     bool
	logf       func(string, ...any)
	bins       cache
	pki        *pki
	apiURL     string
	kubeconfig string
	restConfig *rest.Config
	procs      []*Process
	stopOnce   sync.Once
}

// Start starts a test bed and waits until it is ready: the API server
// serves, the controllers and the scheduler are healthy, the kwok node is
// Ready and schedulable, and namespace default has its ServiceAccount. It
// waits at most three minutes (plus the time to build missing binaries),
// or until ctx ends. On error it stops whatever it started.
func Start(ctx context.Context, opts Options) (*Bed, error) {
	b, err := start(ctx, opts)
	if err != nil {
		b.Stop()
		return nil, err
	}
	return b, nil
}

// start is Start, but on error it returns the partially started bed so the
// caller can read its logs before stopping it.
func start(ctx context.Context, opts Options) (*Bed, error) {
	b := &Bed{dir: opts.Dir, logf: opts.Logf}
	if b.logf == nil {
		b.logf = slogf
	}
	if err := b.makeDir(); err != nil {
		return b, err
	}
	bins, err := ensureBinaries(ctx, b.logf)
	if err != nil {
		return b, err
	}
	b.bins = bins

	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := b.startControlPlane(ctx); err != nil {
		return b, err
	}
	if err := b.startNode(ctx); err != nil {
		return b, err
	}
	b.logf("test bed ready in %s: %s (kubeconfig %s)", time.Since(begin).Round(time.Millisecond), b.apiURL, b.kubeconfig)
	return b, nil
}

func (b *Bed) makeDir() error {
	if b.dir == "" {
		dir, err := os.MkdirTemp("", "uc-testbed-")
		if err != nil {
			return fmt.Errorf("create work dir: %w", err)
		}
		b.dir, b.ownDir = dir, true
		return nil
	}
	abs, err := filepath.Abs(b.dir)
	if err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	b.dir = abs
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return fmt.Errorf("create work dir: %w", err)
	}
	return nil
}

// Stop stops every component, each with SIGTERM and then SIGKILL after a
// grace period, in the reverse order of their start, and removes the work
// directory if Start created it. It is idempotent.
func (b *Bed) Stop() {
	b.stopOnce.Do(func() {
		for _, p := range slices.Backward(b.procs) {
			p.Stop(stopGrace)
		}
		if b.ownDir {
			if err := os.RemoveAll(b.dir); err != nil {
				b.logf("remove work dir: %v", err)
			}
		}
	})
}

// RESTConfig returns a new admin client config (user admin in group
// system:masters) with QPS 200 and Burst 400.
func (b *Bed) RESTConfig() *rest.Config { return rest.CopyConfig(b.restConfig) }

// Kubeconfig returns the path of an admin kubeconfig file.
func (b *Bed) Kubeconfig() string { return b.kubeconfig }

// APIServerURL returns the API server's https URL.
func (b *Bed) APIServerURL() string { return b.apiURL }

// Dir returns the work directory, which holds a log file per component.
func (b *Bed) Dir() string { return b.dir }

// Component is the running process of one component — "etcd",
// "kube-apiserver", "kube-controller-manager", "kube-scheduler" or "kwok" —
// for tests that pause it (Process.Freeze), or nil.
func (b *Bed) Component(name string) *Process {
	for _, p := range b.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

// launch starts one component, logging to <work dir>/<name>.log, and
// registers it for Stop.
func (b *Bed) launch(name string, args ...string) (*Process, error) {
	p, err := StartProcess(name, b.bins.bin(name), filepath.Join(b.dir, name+".log"), args...)
	if err != nil {
		return nil, err
	}
	b.procs = append(b.procs, p)
	return p, nil
}

// waitFor polls check until it succeeds and logs how long that took.
func (b *Bed) waitFor(ctx context.Context, what string, check func(context.Context) error, watch ...*Process) error {
	begin := time.Now()
	if err := poll(ctx, what, check, watch...); err != nil {
		return err
	}
	b.logf("%s ready after %s", what, time.Since(begin).Round(time.Millisecond))
	return nil
}

func slogf(format string, args ...any) { slog.Info(fmt.Sprintf(format, args...)) }
