package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var catsetGVR = schema.GroupVersionResource{Group: "examples.universalcontroller.dev", Version: "v1", Resource: "catsets"}

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// npm runs npm in dir, failing t with its output.
func npm(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "npm", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm %v: %v\n%s", args, err, out)
	}
}

// catsetPods checks that the CatSet has exactly the Pods <name>-0 … <name>-(n-1),
// all Ready, and says so in its status.
func catsetPods(ctx context.Context, ns, name string, n int) error {
	pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := map[string]bool{}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			ready[p.Name] = ready[p.Name] || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		}
		ready[p.Name] = ready[p.Name] && p.DeletionTimestamp == nil
	}
	for i := range n {
		if pod := fmt.Sprintf("%s-%d", name, i); !ready[pod] {
			return fmt.Errorf("pod %s is not there and Ready (pods: %v)", pod, ready)
		}
	}
	if len(pods.Items) != n {
		return fmt.Errorf("%d pods, want %d: %v", len(pods.Items), n, ready)
	}
	cs, err := env.dyn.Resource(catsetGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	replicas, _, _ := unstructured.NestedInt64(cs.Object, "status", "replicas")
	readyReplicas, _, _ := unstructured.NestedInt64(cs.Object, "status", "readyReplicas")
	if replicas != int64(n) || readyReplicas != int64(n) {
		return fmt.Errorf("catset status: replicas %d, readyReplicas %d, want %d", replicas, readyReplicas, n)
	}
	return syncedTrue(cs)
}

// TestJSWorkerCatSet: the CatSet hook, written in JavaScript with the npm
// packages nats and cloudevents (examples/js-catset), serves a controller
// on the bus: a CatSet's Pods come up in order and go on scale-down.
func TestJSWorkerCatSet(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed for the JavaScript worker test (apt-get install -y nodejs npm): %v", tool, err)
		}
	}
	ctx := t.Context()
	dir := filepath.Join(env.root, "examples/js-catset")
	npm(t, dir, "ci", "--no-audit", "--no-fund")
	npm(t, dir, "test")

	worker := exec.CommandContext(ctx, "node", "worker.js")
	worker.Dir = dir
	worker.Env = append(os.Environ(), "NATS_URL="+env.uc.natsURL)
	var out lockedBuffer
	worker.Stdout, worker.Stderr = &out, &out
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = worker.Wait() // the test's context kills it
		if t.Failed() {
			t.Logf("JavaScript worker output:\n%s", out.String())
		}
	})

	for _, f := range []string{"crd.yaml", "controller.yaml"} {
		registerManifest(t, "examples/js-catset/"+f, nil)
	}
	ns := namespace(t)
	catset := manifestObject(t, "examples/js-catset/catset.yaml")
	catset.SetNamespace(ns)
	eventually(t, 30*time.Second, func() error { // the CRD may not be served yet
		_, err := env.dyn.Resource(catsetGVR).Namespace(ns).Create(ctx, catset, metav1.CreateOptions{})
		return err
	})
	eventually(t, 2*time.Minute, func() error { return catsetPods(ctx, ns, "nginx", 3) })

	if _, err := env.dyn.Resource(catsetGVR).Namespace(ns).Patch(ctx, "nginx", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error { return catsetPods(ctx, ns, "nginx", 1) })
}
