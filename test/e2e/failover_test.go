package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/dispatcher/worker"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/test/testbed"
)

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

// roleProcess is one uc role running as its own process.
type roleProcess struct {
	name string
	log  string
	proc *testbed.Process
}

func startRole(t *testing.T, dir, name string, args ...string) *roleProcess {
	t.Helper()
	log := filepath.Join(dir, name+".log")
	p, err := testbed.StartProcess(name, env.uc.bin, log, args...)
	if err != nil {
		t.Fatal(err)
	}
	r := &roleProcess{name: name, log: log, proc: p}
	t.Cleanup(func() {
		p.Stop(5 * time.Second)
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("--- %s log ---\n%s", name, b)
		}
	})
	return r
}

func (r *roleProcess) logHas(s string) bool {
	b, _ := os.ReadFile(r.log)
	return strings.Contains(string(b), s)
}

// TestWatcherFailover runs uc as separate roles on an external NATS server
// with two watchers: one leads, and when it is killed (SIGKILL) the standby
// takes over and every parent created meanwhile converges.
func TestWatcherFailover(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	dir := t.TempDir()
	srv, err := testbed.StartNATS(ctx, filepath.Join(dir, "nats"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	common := []string{"--kubeconfig", env.bed.Kubeconfig(), "--nats-url", srv.URL(), "--log-level", "debug"}
	startRole(t, dir, "dispatcher", append([]string{"dispatcher"}, common...)...)
	startRole(t, dir, "applier", append([]string{"applier"}, common...)...)
	watchers := []*roleProcess{
		startRole(t, dir, "watcher-a", append([]string{"watcher", "--leader-elect-namespace", ns}, common...)...),
		startRole(t, dir, "watcher-b", append([]string{"watcher", "--leader-elect-namespace", ns}, common...)...),
	}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = worker.Serve(ctx, js, "widget-controller", worker.Sync(widgetSync)) }()
	if err := applyFile(ctx, filepath.Join(env.root, "test/e2e/testdata/widget-crd.yaml")); err != nil {
		t.Fatal(err)
	}

	create := func(name string) {
		w := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "e2e.universalcontroller.dev/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": ns},
		}}
		if _, err := env.dyn.Resource(widgetGVR).Namespace(ns).Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	converged := func(names ...string) func() error {
		return func() error {
			for _, n := range names {
				if _, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{}); err != nil {
					return err
				}
			}
			return nil
		}
	}
	create("before")
	eventually(t, time.Minute, converged("before"))

	var leader, standby *roleProcess
	eventually(t, 30*time.Second, func() error {
		for i, w := range watchers {
			if w.logHas("leading: this watcher is active") {
				leader, standby = w, watchers[1-i]
				return nil
			}
		}
		return fmt.Errorf("no watcher leads")
	})
	leader.proc.Kill()
	killed := time.Now()
	t.Logf("killed the leader, %s", leader.name)
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("after-%d", i))
		create(names[i])
	}
	eventually(t, 90*time.Second, converged(names...))
	t.Logf("the standby %s took over; the 10 parents created after the kill converged %s after it",
		standby.name, time.Since(killed).Round(100*time.Millisecond))
	if !standby.logHas("leading: this watcher is active") {
		t.Fatal("the standby never logged that it leads")
	}
}
