package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/test/testbed"
)

// ucProcess is uc run as a separate process, with its embedded NATS server
// storing to files in dataDir, so it can be killed and started again.
type ucProcess struct {
	bin, kubeconfig, dir string
	natsURL              string
	natsListen           string
	proc                 *testbed.Process
}

func startUC(ctx context.Context, bin, kubeconfig, dir string) (*ucProcess, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := testbed.FreePort()
	if err != nil {
		return nil, err
	}
	u := &ucProcess{bin: bin, kubeconfig: kubeconfig, dir: dir,
		natsListen: fmt.Sprintf("127.0.0.1:%d", port), natsURL: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	return u, u.start(ctx)
}

func (u *ucProcess) start(ctx context.Context) error {
	var err error
	u.proc, err = testbed.StartProcess("uc", u.bin, filepath.Join(u.dir, "uc.log"),
		"run", "--kubeconfig", u.kubeconfig, "--nats-listen", u.natsListen,
		"--data-dir", filepath.Join(u.dir, "data"), "--log-level", "debug")
	if err != nil {
		return err
	}
	return poll(ctx, time.Minute, func() error {
		if err := u.proc.Exited(); err != nil {
			return backoffStop{err}
		}
		nc, err := nats.Connect(u.natsURL)
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		_, err = js.Stream(ctx, bus.ReplyStream)
		return err
	})
}

// kill kills uc with SIGKILL, like a crash.
func (u *ucProcess) kill() { u.proc.Kill() }

func (u *ucProcess) stop() { u.proc.Stop(10 * time.Second) }

func (u *ucProcess) dumpLog() {
	b, _ := os.ReadFile(filepath.Join(u.dir, "uc.log"))
	lines := strings.Split(string(b), "\n")
	fmt.Fprintf(os.Stderr, "--- last lines of uc.log ---\n%s\n", strings.Join(lines[max(0, len(lines)-2000):], "\n"))
}

// backoffStop ends a poll at once with its error.
type backoffStop struct{ err error }

func (b backoffStop) Error() string { return b.err.Error() }

// poll calls check until it returns nil or the timeout passes.
func poll(ctx context.Context, timeout time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		var stop backoffStop
		if err == nil || errors.As(err, &stop) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s: %w", timeout, err)
		case <-tick.C:
		}
	}
}

// eventually fails t unless check passes within timeout.
func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	start := time.Now()
	if err := poll(t.Context(), timeout, check); err != nil {
		t.Fatal(err)
	}
	t.Logf("condition met after %s", time.Since(start).Round(time.Millisecond))
}

// applyFile applies every object of a YAML file with server-side apply.
func applyFile(ctx context.Context, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.kube.Discovery()))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if obj.Object == nil {
			continue
		}
		if err := applyObject(ctx, mapper, &obj); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}

func applyObject(ctx context.Context, mapper *restmapper.DeferredDiscoveryRESTMapper, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	return poll(ctx, 30*time.Second, func() error {
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			mapper.Reset() // a CRD just installed
			return err
		}
		res := env.dyn.Resource(m.Resource)
		var ri interface {
			Apply(context.Context, string, *unstructured.Unstructured, metav1.ApplyOptions, ...string) (*unstructured.Unstructured, error)
		} = res
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = "default"
			}
			ri = res.Namespace(ns)
		}
		_, err = ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "e2e", Force: true})
		return err
	})
}

// gvr of the resources the tests use.
var (
	fooGVR        = schema.GroupVersionResource{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Resource: "foos"}
	barGVR        = schema.GroupVersionResource{Group: "e2e.universalcontroller.dev", Version: "v1", Resource: "bars"}
	deploymentGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// namespace creates a namespace for one test and deletes it afterwards.
func namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
	nsGVR := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	if _, err := env.dyn.Resource(nsGVR).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.dyn.Resource(nsGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	// Pods need the namespace's default ServiceAccount.
	eventually(t, 30*time.Second, func() error {
		_, err := env.kube.CoreV1().ServiceAccounts(name).Get(t.Context(), "default", metav1.GetOptions{})
		return err
	})
	return name
}

// countingHook serves the Foo example's sync hook, counts calls per parent,
// and can hold the calls of one parent until released.
type countingHook struct {
	mu          sync.Mutex
	generations map[string][]int64 // by namespace/name: the parent generation each call saw
	gates       map[string]chan struct{}
}

func newCountingHook() *countingHook {
	return &countingHook{generations: map[string][]int64{}, gates: map[string]chan struct{}{}}
}

// seen lists the parent generation each call for key saw, in call order.
func (h *countingHook) seen(key string) []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.generations[key])
}

// hold makes calls for key wait until the returned release is called.
func (h *countingHook) hold(key string) (release func()) {
	gate := make(chan struct{})
	h.mu.Lock()
	h.gates[key] = gate
	h.mu.Unlock()
	return sync.OnceFunc(func() {
		h.mu.Lock()
		delete(h.gates, key)
		h.mu.Unlock()
		close(gate)
	})
}
