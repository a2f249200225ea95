package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/examples/foo"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// Hook and Handle make countingHook a hook.Handler for the sync hook.
func (h *countingHook) Hook() string { return hooks.Sync }

func (h *countingHook) Handle(ctx context.Context, data []byte) (any, error) {
	var req hook.SyncRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	parent, err := hook.Decode[metav1.PartialObjectMetadata](req.Parent)
	if err != nil {
		return nil, err
	}
	key := parent.Namespace + "/" + parent.Name
	h.mu.Lock()
	h.generations[key] = append(h.generations[key], parent.Generation)
	h.mu.Unlock()
	if err := h.wait(ctx, key); err != nil {
		return nil, err
	}
	return foo.Sync(ctx, &req)
}

func newFoo(ns, name string, replicas int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "samplecontroller.k8s.io/v1alpha1",
		"kind":       "Foo",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       map[string]any{"deploymentName": name + "-deploy", "replicas": replicas},
	}}
}

func createFoo(t *testing.T, ns, name string, replicas int64) *unstructured.Unstructured {
	t.Helper()
	f, err := env.dyn.Resource(fooGVR).Namespace(ns).Create(t.Context(), newFoo(ns, name, replicas), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func patchFoo(ctx context.Context, ns, name string, patch string) (*unstructured.Unstructured, error) {
	return env.dyn.Resource(fooGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
}

// fooConverged checks that a Foo's Deployment has the desired replicas, and
// that the Foo's status reports the available ones for its latest generation.
func fooConverged(ctx context.Context, ns, name string, replicas int64) error {
	f, err := env.dyn.Resource(fooGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	d, err := env.dyn.Resource(deploymentGVR).Namespace(ns).Get(ctx, name+"-deploy", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if ref := metav1.GetControllerOf(d); ref == nil || ref.UID != f.GetUID() {
		return fmt.Errorf("deployment %s is not controlled by its Foo: %v", name, d.GetOwnerReferences())
	}
	if got, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); got != replicas {
		return fmt.Errorf("deployment %s has %d replicas, want %d", name, got, replicas)
	}
	avail, _, _ := unstructured.NestedInt64(d.Object, "status", "availableReplicas")
	if avail != replicas {
		return fmt.Errorf("deployment %s has %d available replicas, want %d", name, avail, replicas)
	}
	status, _, _ := unstructured.NestedInt64(f.Object, "status", "availableReplicas")
	observed, _, _ := unstructured.NestedInt64(f.Object, "status", "observedGeneration")
	if status != replicas || observed != f.GetGeneration() {
		return fmt.Errorf("foo %s status: availableReplicas %d (want %d), observedGeneration %d (want %d)", name, status, replicas, observed, f.GetGeneration())
	}
	return syncedTrue(f)
}

// syncedTrue checks the parent's Synced condition is True.
func syncedTrue(parent *unstructured.Unstructured) error {
	c := condition(parent, "Synced")
	if c == nil || c["status"] != "True" {
		return fmt.Errorf("%s: Synced condition is %v", parent.GetName(), c)
	}
	return nil
}

func condition(parent *unstructured.Unstructured, typ string) map[string]any {
	list, _, _ := unstructured.NestedSlice(parent.Object, "status", "conditions")
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// TestFooLifecycle: creating, updating and deleting a Foo drives its
// Deployment, the Foo's status follows the Deployment, and a Deployment
// scaled by hand is put back.
func TestFooLifecycle(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	createFoo(t, ns, "web", 2)
	eventually(t, time.Minute, func() error { return fooConverged(ctx, ns, "web", 2) })

	if _, err := patchFoo(ctx, ns, "web", `{"spec":{"replicas":3}}`); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error { return fooConverged(ctx, ns, "web", 3) })

	// Someone scales the Deployment by hand: uc puts it back.
	if _, err := env.dyn.Resource(deploymentGVR).Namespace(ns).Patch(ctx, "web-deploy", types.MergePatchType,
		[]byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		d, err := env.dyn.Resource(deploymentGVR).Namespace(ns).Get(ctx, "web-deploy", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.GetGeneration() < 3 {
			return fmt.Errorf("the hand scaling has not landed yet (generation %d)", d.GetGeneration())
		}
		return fooConverged(ctx, ns, "web", 3)
	})

	// Deleting the Foo deletes the Deployment (garbage collector).
	if err := env.dyn.Resource(fooGVR).Namespace(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		_, err := env.dyn.Resource(deploymentGVR).Namespace(ns).Get(ctx, "web-deploy", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("deployment still there (err %v)", err)
	})
}

// TestCoalescing: 50 edits of one Foo while its hook call is in flight give
// one more hook call, which sees the latest state.
func TestCoalescing(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	key := ns + "/busy"
	createFoo(t, ns, "busy", 1)
	eventually(t, time.Minute, func() error { return fooConverged(ctx, ns, "busy", 1) })

	release := env.foo.hold(key)
	defer release()
	before := len(env.foo.seen(key))
	var last *unstructured.Unstructured
	const edits = 50
	for i := 1; i <= edits; i++ {
		var err error
		if last, err = patchFoo(ctx, ns, "busy", fmt.Sprintf(`{"metadata":{"annotations":{"edit":"%d"}},"spec":{"replicas":%d}}`, i, i%3+1)); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the watcher has published the latest observation: the
	// request waiting on the bus for this parent carries its resourceVersion.
	eventually(t, 30*time.Second, func() error { return requestWaitingFor(ctx, last) })
	release()
	want := int64(edits%3 + 1)
	eventually(t, time.Minute, func() error { return fooConverged(ctx, ns, "busy", want) })
	// Count the calls from the first edit to the first call that saw the
	// last edit (later calls follow the Deployment's own progress).
	seen := env.foo.seen(key)[before:]
	calls := slices.Index(seen, last.GetGeneration()) + 1
	t.Logf("%d edits gave %d hook calls until the hook saw the latest state (generations seen: %v)", edits, calls, seen)
	if calls == 0 || calls > 2 {
		t.Fatalf("want the held call and one more with the latest generation %d; got %v", last.GetGeneration(), seen)
	}
}

// requestWaitingFor checks that the request stream holds a request for the
// parent at exactly its current resourceVersion.
func requestWaitingFor(ctx context.Context, parent *unstructured.Unstructured) error {
	s, err := env.js.Stream(ctx, bus.RequestStream)
	if err != nil {
		return err
	}
	addr := bus.Address{Controller: foo.Controller, Hook: hooks.Sync, Partition: bus.Partition(parent.GetUID(), bus.DefaultPartitions), ParentUID: parent.GetUID()}
	msg, err := s.GetLastMsgForSubject(ctx, addr.RequestSubject())
	if err != nil {
		return err
	}
	if rv := msg.Header.Get("ce-ucresourceversion"); rv != parent.GetResourceVersion() {
		return fmt.Errorf("waiting request is at resourceVersion %s, want %s", rv, parent.GetResourceVersion())
	}
	return nil
}

// TestCrashRecovery: uc is killed (SIGKILL) in the middle of a burst of 100
// Foo creations and started again; every Foo converges.
func TestCrashRecovery(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	create := func(from, to int) {
		for i := from; i < to; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := env.dyn.Resource(fooGVR).Namespace(ns).Create(ctx, newFoo(ns, fmt.Sprintf("foo-%03d", i), 1), metav1.CreateOptions{})
				errs <- err
			}()
		}
	}
	create(0, n/2)
	// Kill uc once it has started applying the burst.
	eventually(t, time.Minute, func() error {
		list, err := env.dyn.Resource(deploymentGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) < 5 {
			return fmt.Errorf("%d deployments so far (err %v)", len(list.Items), err)
		}
		return nil
	})
	env.uc.kill()
	t.Log("uc killed")
	create(n/2, n)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := env.uc.start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Log("uc restarted")
	eventually(t, 3*time.Minute, func() error {
		for i := range n {
			if err := fooConverged(ctx, ns, fmt.Sprintf("foo-%03d", i), 1); err != nil {
				return err
			}
		}
		return nil
	})
}
