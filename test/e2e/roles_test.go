package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
	"universalcontroller.dev/uc/test/testbed"
)

// Tests in this file's family run uc as separate role processes (uc
// watcher, uc dispatcher, uc applier) on an external NATS server or
// cluster, serving the test-only Widget controller.

var widgetGVR = schema.GroupVersionResource{Group: "e2e.universalcontroller.dev", Version: "v1", Resource: "widgets"}

// widgetSync gives every Widget one ConfigMap named after it, carrying its
// spec.value.
func widgetSync(_ context.Context, req *hooks.SyncRequest) (*hooks.SyncResponse, error) {
	value, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "value")
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": req.Parent.GetName()},
		"data":     map[string]any{"widget": req.Parent.GetName(), "value": value},
	}}
	return &hooks.SyncResponse{Children: []*unstructured.Unstructured{cm}}, nil
}

// roleProcess is one uc role (or hook worker) running as its own process.
type roleProcess struct {
	name string
	log  string
	bin  string
	args []string
	proc *testbed.Process
}

// logHas tells whether a line of the role's log holds every one of parts.
func (r *roleProcess) logHas(parts ...string) bool {
	return r.lastLine(parts...) != ""
}

// eachMatch calls fn with the submatches of re on each line of the role's
// log it matches, in order.
func (r *roleProcess) eachMatch(t *testing.T, re *regexp.Regexp, fn func(m []string)) {
	t.Helper()
	f, err := os.Open(r.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			fn(m)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", r.log, err)
	}
}

// lastLine is the last line of the role's log that holds every one of
// parts, or "".
func (r *roleProcess) lastLine(parts ...string) string {
	b, _ := os.ReadFile(r.log)
	last := ""
	for line := range strings.SplitSeq(string(b), "\n") {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			last = line
		}
	}
	return last
}

// served is the address r's latest run logged it serves flag's endpoint
// on ("--metrics-addr", "--health-addr"), or "" before it logged one.
func (r *roleProcess) served(flag string) string {
	line := r.lastLine("msg=serving", "flag="+flag+" ")
	_, addr, _ := strings.Cut(line, "flag="+flag+" addr=")
	addr, _, _ = strings.Cut(addr, " ")
	return addr
}

// rolesOnBus is a namespace, a work dir and a NATS URL on which tests start
// uc's roles; the Widget controller is registered and its hook served.
type rolesOnBus struct {
	t    *testing.T
	ns   string
	dir  string
	args []string // flags every role gets

	mu     sync.Mutex
	calls  map[string]int    // hook calls by Widget name
	lastRV map[string]string // the Widget's resourceVersion the last call saw

	js          jetstream.JetStream // the test's own connection
	stopWorker  context.CancelFunc  // stops the hook worker
	workerEnded chan struct{}       // closed when it stopped
}

// settled fails until the hook was called with the Widget as it is now,
// and that request was applied: the fence names a request that observed
// the Widget at its resourceVersion. (The hook sees the latest Widget
// before its reply is applied; an apply that writes the Widget's status
// makes a new state, and one more request.)
func (b *rolesOnBus) settled(name string) func() error {
	return func() error {
		ctx := b.t.Context()
		w, err := env.dyn.Resource(widgetGVR).Namespace(b.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		b.mu.Lock()
		saw := b.lastRV[name]
		b.mu.Unlock()
		if saw != w.GetResourceVersion() {
			return fmt.Errorf("the hook last saw %s at resourceVersion %q, it is at %q", name, saw, w.GetResourceVersion())
		}
		kv, err := b.js.KeyValue(ctx, bus.FenceBucket)
		if err != nil {
			return err
		}
		e, err := kv.Get(ctx, string(w.GetUID()))
		if err != nil {
			return fmt.Errorf("the fence of %s: %w", name, err)
		}
		f, err := bus.ParseFence(e.Value())
		if err != nil {
			return err
		}
		if f.ResourceVersion != w.GetResourceVersion() {
			return fmt.Errorf("the request last applied for %s observed it at resourceVersion %q, it is at %q", name, f.ResourceVersion, w.GetResourceVersion())
		}
		return nil
	}
}

// callsOf counts the hook calls a Widget had.
func (b *rolesOnBus) callsOf(name string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[name]
}

func newRolesOnBus(t *testing.T, natsURL string, flags ...string) *rolesOnBus {
	t.Helper()
	b := &rolesOnBus{t: t, ns: namespace(t), dir: t.TempDir(), calls: map[string]int{}, lastRV: map[string]string{},
		args: append([]string{"--kubeconfig", env.bed.Kubeconfig(), "--nats-url", natsURL, "--log-level", "debug"}, flags...)}
	nc, err := nats.Connect(natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	b.js = js
	b.startWorker()
	installCRD(t, "test/e2e/testdata/widget-crd.yaml", widgetGVR)
	return b
}

// rolesOfInstall starts a NATS server for the test, and a rolesOnBus on
// it whose roles serve only the controllers labelled installLabel=install
// (the suite's uc serves the others), each with flags. No hook runs yet.
func rolesOfInstall(t *testing.T, install string, flags ...string) *rolesOnBus {
	t.Helper()
	srv, err := testbed.StartNATS(t.Context(), filepath.Join(t.TempDir(), "nats"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return &rolesOnBus{t: t, ns: namespace(t), dir: t.TempDir(), js: bustest.Connect(t, srv.URL()), args: append([]string{
		"--kubeconfig", env.bed.Kubeconfig(), "--nats-url", srv.URL(), "--log-level", "debug",
		"--controller-selector", installLabel + "=" + install}, flags...)}
}

// startWorker serves the Widget controller's sync hook in the test process,
// counting calls, until the test ends or pauseWorker.
func (b *rolesOnBus) startWorker() {
	counted := func(ctx context.Context, req *hooks.SyncRequest) (*hooks.SyncResponse, error) {
		b.mu.Lock()
		b.calls[req.Parent.GetName()]++
		b.lastRV[req.Parent.GetName()] = req.Parent.GetResourceVersion()
		b.mu.Unlock()
		return widgetSync(ctx, req)
	}
	ctx, cancel := context.WithCancel(b.t.Context())
	b.stopWorker, b.workerEnded = cancel, make(chan struct{})
	go func() {
		defer close(b.workerEnded)
		_ = hook.Serve(ctx, b.js, "widget-controller", hook.Func(hooks.Sync, counted))
	}()
}

// pauseWorker stops the hook worker and waits until it stopped; resume it
// with startWorker.
func (b *rolesOnBus) pauseWorker() {
	b.stopWorker()
	<-b.workerEnded
}

// start starts one role process named name: `uc <role> <flags…> <args…>`,
// its metrics on a free port unless args say where.
func (b *rolesOnBus) start(name, role string, args ...string) *roleProcess {
	b.t.Helper()
	return b.startBinary(name, env.uc.bin, slices.Concat([]string{role, "--metrics-addr", "127.0.0.1:0"}, b.args, args)...)
}

// startBinary starts bin with args as a process named name, logging to
// name.log in the work dir, and stops it when the test ends.
func (b *rolesOnBus) startBinary(name, bin string, args ...string) *roleProcess {
	t := b.t
	t.Helper()
	r := &roleProcess{name: name, log: filepath.Join(b.dir, name+".log"), bin: bin, args: args}
	b.restart(r)
	t.Cleanup(func() {
		r.proc.Stop(5 * time.Second)
		if t.Failed() || os.Getenv("UC_E2E_DUMP") != "" {
			out, _ := os.ReadFile(r.log)
			t.Logf("--- %s log ---\n%s", name, out)
		}
	})
	return r
}

// restart starts the process again with the same flags, once it ended;
// its log goes on in the same file.
func (b *rolesOnBus) restart(r *roleProcess) {
	b.t.Helper()
	p, err := testbed.StartProcess(r.name, r.bin, r.log, r.args...)
	if err != nil {
		b.t.Fatal(err)
	}
	r.proc = p
}

// createWidget creates a Widget with spec.value.
func (b *rolesOnBus) createWidget(name, value string) *unstructured.Unstructured {
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "e2e.universalcontroller.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": b.ns},
		"spec":     map[string]any{"value": value},
	}}
	got, err := env.dyn.Resource(widgetGVR).Namespace(b.ns).Create(b.t.Context(), w, metav1.CreateOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	return got
}

// setWidget sets a Widget's spec.value.
func (b *rolesOnBus) setWidget(name, value string) *unstructured.Unstructured {
	patch := fmt.Sprintf(`{"spec":{"value":%q}}`, value)
	got, err := env.dyn.Resource(widgetGVR).Namespace(b.ns).Patch(b.t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	return got
}

// converged checks every named Widget's ConfigMap carries value.
func (b *rolesOnBus) converged(value string, names ...string) func() error {
	return func() error {
		for _, n := range names {
			cm, err := env.kube.CoreV1().ConfigMaps(b.ns).Get(b.t.Context(), n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.Data["value"] != value {
				return fmt.Errorf("%s has value %q, want %q", n, cm.Data["value"], value)
			}
		}
		return nil
	}
}
