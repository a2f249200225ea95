package e2e

// The examples of issue 3 on the test bed, each with its hooks served in
// this process: update strategies, a cluster-scoped parent with namespaced
// children, and a finalize hook that cleans up outside the cluster.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	clusterparent "universalcontroller.dev/uc/examples/cluster-parent"
	finalizecleanup "universalcontroller.dev/uc/examples/finalize-cleanup"
	updatestrategies "universalcontroller.dev/uc/examples/update-strategies"
	"universalcontroller.dev/uc/schemas/hooks"
)

// strategyChildren are a StrategyDemo's children as they are now.
type strategyChildren struct {
	onDelete *corev1.ConfigMap
	recreate *corev1.Secret
	inPlace  *corev1.Service
}

func getStrategyChildren(ctx context.Context, ns, parent string) (strategyChildren, error) {
	var c strategyChildren
	var err error
	if c.onDelete, err = env.kube.CoreV1().ConfigMaps(ns).Get(ctx, updatestrategies.OnDeleteName(parent), metav1.GetOptions{}); err != nil {
		return c, err
	}
	if c.recreate, err = env.kube.CoreV1().Secrets(ns).Get(ctx, updatestrategies.RecreateName(parent), metav1.GetOptions{}); err != nil {
		return c, err
	}
	c.inPlace, err = env.kube.CoreV1().Services(ns).Get(ctx, updatestrategies.InPlaceName(parent), metav1.GetOptions{})
	return c, err
}

// messages is the message each child carries: OnDelete, Recreate, InPlace.
func (c strategyChildren) messages() [3]string {
	return [3]string{c.onDelete.Data["message"], string(c.recreate.Data["message"]), c.inPlace.Annotations[updatestrategies.AnnotationMessage]}
}

func (c strategyChildren) versions() map[string]string {
	return map[string]string{
		"ConfigMap": string(c.onDelete.UID) + "@" + c.onDelete.ResourceVersion,
		"Secret":    string(c.recreate.UID) + "@" + c.recreate.ResourceVersion,
		"Service":   string(c.inPlace.UID) + "@" + c.inPlace.ResourceVersion,
	}
}

// strategyDemoAt waits until the children carry the messages and the
// status reports them, for the parent's latest generation.
func strategyDemoAt(t *testing.T, ns, name string, want [3]string) strategyChildren {
	t.Helper()
	ctx := t.Context()
	var c strategyChildren
	eventually(t, time.Minute, func() error {
		var err error
		if c, err = getStrategyChildren(ctx, ns, name); err != nil {
			return err
		}
		if got := c.messages(); got != want {
			return fmt.Errorf("children carry %q, want %q", got, want)
		}
		p, err := env.dyn.Resource(updatestrategies.GVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, o := range []metav1.Object{c.onDelete, c.recreate, c.inPlace} {
			if err := controlledBy(o, p.GetUID()); err != nil {
				return err
			}
			// generateSelector: children carry the parent's UID.
			if got := o.GetLabels()["controller-uid"]; got != string(p.GetUID()) {
				return fmt.Errorf("%s is labelled controller-uid=%q, want the parent's UID", o.GetName(), got)
			}
		}
		status, _, _ := unstructured.NestedStringMap(p.Object, "status", "messages")
		if status["onDelete"] != want[0] || status["recreate"] != want[1] || status["inPlace"] != want[2] {
			return fmt.Errorf("status.messages = %v", status)
		}
		return syncedTrue(p)
	})
	return c
}

// resyncsWriteNothing waits for more hook calls of an unchanged parent
// (resyncs) and checks that neither its children nor the parent were
// written meanwhile.
func resyncsWriteNothing(t *testing.T, rec *recorder, ns, name string, parentGVR schema.GroupVersionResource, children func() (map[string]string, error)) {
	t.Helper()
	ctx := t.Context()
	before, err := children()
	if err != nil {
		t.Fatal(err)
	}
	parent, err := env.dyn.Resource(parentGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := rec.count(ns, name)
	const resyncs = 3
	eventually(t, 30*time.Second, func() error {
		if got := rec.count(ns, name); got < n+resyncs {
			return fmt.Errorf("%d hook calls since, want %d", got-n, resyncs)
		}
		return nil
	})
	after, err := children()
	if err != nil {
		t.Fatal(err)
	}
	now, err := env.dyn.Resource(parentGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d hook calls of an unchanged parent (resyncs); children %v; parent resourceVersion %s → %s",
		rec.count(ns, name)-n, after, parent.GetResourceVersion(), now.GetResourceVersion())
	for kind, v := range before {
		if after[kind] != v {
			t.Errorf("the %s was written by a resync: %s → %s (UID@resourceVersion)", kind, v, after[kind])
		}
	}
	if now.GetResourceVersion() != parent.GetResourceVersion() {
		t.Errorf("the parent was written by a resync: resourceVersion %s → %s", parent.GetResourceVersion(), now.GetResourceVersion())
	}
}

// TestExampleUpdateStrategies: when the StrategyDemo's message changes, the
// OnDelete ConfigMap is left as it is until deleted by hand (then it comes
// back with the new message), the Recreate Secret is deleted and created
// again (a new UID), and the InPlace Service is updated (the same UID).
// Resyncs of an unchanged parent write nothing: the defaults the apiserver
// fills into the Service and the Secret never count as a difference, so
// there is no update and no Recreate loop. The controller has no finalize
// hook, so its parents get no finalizer.
func TestExampleUpdateStrategies(t *testing.T) {
	ctx := t.Context()
	rec := newRecorder()
	installExample(t, "examples/update-strategies", updatestrategies.GVR, updatestrategies.Controller, func(u *unstructured.Unstructured) {
		if u.GetKind() == "UniversalController" {
			_ = unstructured.SetNestedField(u.Object, int64(1), "spec", "resyncPeriodSeconds")
		}
	}, rec.handler(hooks.Sync, typed(updatestrategies.Sync)))
	ns := namespace(t)
	demos := env.dyn.Resource(updatestrategies.GVR).Namespace(ns)
	if _, err := demos.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "examples.universalcontroller.dev/v1alpha1", "kind": "StrategyDemo",
		"metadata": map[string]any{"name": "demo", "namespace": ns},
		"spec":     map[string]any{"message": "one"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := strategyDemoAt(t, ns, "demo", [3]string{"one", "one", "one"})
	t.Logf("the Service as the apiserver filled it in: clusterIP %s, ports %+v; the Secret's type %s",
		first.inPlace.Spec.ClusterIP, first.inPlace.Spec.Ports, first.recreate.Type)
	if p, _ := demos.Get(ctx, "demo", metav1.GetOptions{}); len(p.GetFinalizers()) != 0 {
		t.Errorf("a parent of a controller without a finalize hook has finalizers %v", p.GetFinalizers())
	}
	versions := func() (map[string]string, error) {
		c, err := getStrategyChildren(ctx, ns, "demo")
		if err != nil {
			return nil, err
		}
		return c.versions(), nil
	}
	resyncsWriteNothing(t, rec, ns, "demo", updatestrategies.GVR, versions)

	// A new message.
	if _, err := demos.Patch(ctx, "demo", types.MergePatchType, []byte(`{"spec":{"message":"two"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	second := strategyDemoAt(t, ns, "demo", [3]string{"one", "two", "two"})
	if second.onDelete.UID != first.onDelete.UID || second.onDelete.ResourceVersion != first.onDelete.ResourceVersion {
		t.Errorf("OnDelete: the ConfigMap was written (UID %s → %s, resourceVersion %s → %s)",
			first.onDelete.UID, second.onDelete.UID, first.onDelete.ResourceVersion, second.onDelete.ResourceVersion)
	}
	if second.recreate.UID == first.recreate.UID {
		t.Errorf("Recreate: the Secret was updated in place (the same UID %s), not recreated", first.recreate.UID)
	}
	if second.inPlace.UID != first.inPlace.UID {
		t.Errorf("InPlace: the Service was recreated (UID %s → %s)", first.inPlace.UID, second.inPlace.UID)
	}
	t.Logf("UIDs: ConfigMap %s → %s, Secret %s → %s, Service %s → %s", first.onDelete.UID, second.onDelete.UID,
		first.recreate.UID, second.recreate.UID, first.inPlace.UID, second.inPlace.UID)

	// OnDelete: deleted by hand, the ConfigMap comes back with the new message.
	if err := env.kube.CoreV1().ConfigMaps(ns).Delete(ctx, updatestrategies.OnDeleteName("demo"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	third := strategyDemoAt(t, ns, "demo", [3]string{"two", "two", "two"})
	if third.onDelete.UID == first.onDelete.UID {
		t.Errorf("OnDelete: the ConfigMap deleted by hand was not created again")
	}
	if third.recreate.UID != second.recreate.UID || third.inPlace.UID != second.inPlace.UID {
		t.Errorf("the other children were recreated when the ConfigMap was")
	}
	// Fields another client writes are not uc's: an annotation added to the
	// Recreate Secret and the InPlace Service neither recreates nor
	// updates them.
	for _, res := range []string{"secrets", "services"} {
		name := updatestrategies.RecreateName("demo")
		if res == "services" {
			name = updatestrategies.InPlaceName("demo")
		}
		if _, err := env.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: res}).Namespace(ns).Patch(ctx, name, types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"someone-else":"was here"}}}`), metav1.PatchOptions{FieldManager: "someone-else"}); err != nil {
			t.Fatal(err)
		}
	}
	// And still no Recreate loop, nor any write, once settled.
	resyncsWriteNothing(t, rec, ns, "demo", updatestrategies.GVR, versions)
}

// TestExampleClusterParent: a cluster-scoped ClusterConfig owns a ConfigMap
// in each namespace it lists; its v1 hook sees them keyed namespace/name.
// Taking a namespace off the list deletes that ConfigMap, adding one creates
// it, the others are updated in place; deleting the ClusterConfig deletes
// them all.
func TestExampleClusterParent(t *testing.T) {
	ctx := t.Context()
	rec := newRecorder()
	installExample(t, "examples/cluster-parent", clusterparent.GVR, clusterparent.Controller, nil, rec.handler(hooks.Sync, typed(clusterparent.Sync)))
	base := namespace(t)
	nss := []string{base, extraNamespace(t, base+"-b"), extraNamespace(t, base+"-c")}
	a, b, c := nss[0], nss[1], nss[2]
	name := base // cluster-wide unique
	configs := env.dyn.Resource(clusterparent.GVR)
	createClusterScoped(t, clusterparent.GVR, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "examples.universalcontroller.dev/v1alpha1", "kind": "ClusterConfig",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"namespaces": []any{a, b}, "data": map[string]any{"greeting": "hello"}},
	}})

	// converged checks the ConfigMaps are in exactly the namespaces with the
	// greeting, and that the hook saw them all (status.present).
	converged := func(greeting string, in, notIn []string) error {
		p, err := configs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, ns := range in {
			cm, err := getConfigMap(ctx, ns, name)
			if err != nil {
				return err
			}
			if err := controlledBy(cm, p.GetUID()); err != nil {
				return err
			}
			if cm.Data["greeting"] != greeting {
				return fmt.Errorf("%s/%s: greeting %q", ns, name, cm.Data["greeting"])
			}
		}
		for _, ns := range notIn {
			if _, err := getConfigMap(ctx, ns, name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s/%s: still there (err %v)", ns, name, err)
			}
		}
		present, _, _ := unstructured.NestedStringSlice(p.Object, "status", "namespaces")
		if want := slices.Sorted(slices.Values(in)); !slices.Equal(present, want) {
			return fmt.Errorf("status.namespaces = %v, want %v", present, want)
		}
		return syncedTrue(p)
	}
	eventually(t, time.Minute, func() error { return converged("hello", []string{a, b}, []string{c}) })
	calls := rec.of("", name)
	last := calls[len(calls)-1]
	t.Logf("%d hook calls; the last observed %v", len(calls), last.children)
	if want := slices.Sorted(slices.Values([]string{a + "/" + name, b + "/" + name})); !slices.Equal(last.children["ConfigMap.v1"], want) {
		t.Errorf("v1 hook of a cluster-scoped parent observed ConfigMaps keyed %v, want %v", last.children["ConfigMap.v1"], want)
	}
	inB, _ := getConfigMap(ctx, b, name)

	if _, err := configs.Patch(ctx, name, types.MergePatchType,
		[]byte(fmt.Sprintf(`{"spec":{"namespaces":[%q,%q],"data":{"greeting":"bye"}}}`, b, c)), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error { return converged("bye", []string{b, c}, []string{a}) })
	if now, _ := getConfigMap(ctx, b, name); now.UID != inB.UID {
		t.Errorf("the ConfigMap in %s was recreated, not updated in place", b)
	}

	if err := configs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The garbage collector follows the owner references (it may take until
	// its next discovery resync to watch a kind whose CRD is new).
	eventually(t, 2*time.Minute, func() error {
		for _, ns := range nss {
			if _, err := getConfigMap(ctx, ns, name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s/%s still there after its ClusterConfig was deleted (err %v)", ns, name, err)
			}
		}
		return nil
	})
}

// heldStore is a registry whose deletions can be held back, like an
// external system slow to clean up.
type heldStore struct {
	finalizecleanup.Store
	mu   sync.Mutex
	held bool
}

func (s *heldStore) hold(h bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = h
}

func (s *heldStore) Delete(ctx context.Context, key string) error {
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	if held {
		return nil
	}
	return s.Store.Delete(ctx, key)
}

// TestExampleFinalizeCleanup: a controller with a finalize hook puts its
// finalizer on its parents. A deleted Registration is kept while the
// finalize hook has not said finalized; its children are still managed
// meanwhile, and a change to it calls the hook again. Once the hook removed
// the registry entry and said finalized, the finalizer comes off and the
// Registration and its ConfigMap go.
func TestExampleFinalizeCleanup(t *testing.T) {
	ctx := t.Context()
	kv, err := finalizecleanup.OpenKVStore(ctx, env.js, "e2e_registrations")
	if err != nil {
		t.Fatal(err)
	}
	store := &heldStore{Store: kv}
	h := &finalizecleanup.Hooks{Store: store} // no retries: only changes call the finalize hook again
	rec := newRecorder()
	installExample(t, "examples/finalize-cleanup", finalizecleanup.GVR, finalizecleanup.Controller, nil,
		rec.handler(hooks.Sync, typed(h.Sync)), rec.handler(hooks.Finalize, typed(h.Finalize)))
	ns := namespace(t)
	regs := env.dyn.Resource(finalizecleanup.GVR).Namespace(ns)
	t.Cleanup(func() { // never leave a parent stuck on a finalizer
		_, _ = regs.Patch(context.Background(), "web", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	if _, err := regs.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "examples.universalcontroller.dev/v1alpha1", "kind": "Registration",
		"metadata": map[string]any{"name": "web", "namespace": ns},
		"spec":     map[string]any{"value": "one"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	key := finalizecleanup.Key(ns, "web")
	entry := func() (string, error) {
		e, err := kv.KV.Get(ctx, key)
		if err != nil {
			return "", err
		}
		return string(e.Value()), nil
	}
	record := func(phase, value string) error {
		c, err := getConfigMap(ctx, ns, finalizecleanup.ChildName("web"))
		if err != nil {
			return err
		}
		if c.Data["phase"] != phase || c.Data["value"] != value {
			return fmt.Errorf("the ConfigMap says %v, want phase %s value %s", c.Data, phase, value)
		}
		return nil
	}
	// finalizeCalls are the finalize hook's calls for the Registration.
	finalizeCalls := func() []hookCall {
		var out []hookCall
		for _, c := range rec.of(ns, "web") {
			if c.hook == hooks.Finalize {
				out = append(out, c)
			}
		}
		return out
	}
	if !t.Run("registered, with its finalizer", func(t *testing.T) {
		eventually(t, time.Minute, func() error {
			p, err := regs.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !slices.Contains(p.GetFinalizers(), finalizecleanup.Finalizer) {
				return fmt.Errorf("finalizers %v, want %s", p.GetFinalizers(), finalizecleanup.Finalizer)
			}
			if v, err := entry(); err != nil || v != "one" {
				return fmt.Errorf("registry entry %q (err %v)", v, err)
			}
			if err := record("Registered", "one"); err != nil {
				return err
			}
			return syncedTrue(p)
		})
	}) {
		return
	}

	var p *unstructured.Unstructured // the parent, finalizing
	if !t.Run("kept, finalizing, while the registry is slow to let go", func(t *testing.T) {
		store.hold(true)
		if err := regs.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, func() error {
			if len(finalizeCalls()) == 0 {
				return fmt.Errorf("no finalize call")
			}
			// The ConfigMap, still managed, says so: the reply was applied.
			return record("Finalizing", "one")
		})
		var err error
		p, err = regs.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the parent went while its finalize hook had not said finalized: %v", err)
		}
		if p.GetDeletionTimestamp() == nil || !slices.Contains(p.GetFinalizers(), finalizecleanup.Finalizer) {
			t.Fatalf("deletionTimestamp %v, finalizers %v", p.GetDeletionTimestamp(), p.GetFinalizers())
		}
		if v, err := entry(); err != nil || v != "one" {
			t.Fatalf("registry entry %q (err %v) while held", v, err)
		}
		for _, c := range finalizeCalls() {
			if !c.finalizing {
				t.Errorf("a finalize request says finalizing: false")
			}
		}
	}) {
		return
	}

	if !t.Run("a change while finalizing calls the hook again", func(t *testing.T) {
		// A change while finalizing calls the hook again, and the children
		// follow it.
		n := len(finalizeCalls())
		if _, err := regs.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"value":"two"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, func() error {
			calls := finalizeCalls()
			if len(calls) <= n || calls[len(calls)-1].generation <= p.GetGeneration() {
				return fmt.Errorf("no finalize call saw the change (%d calls)", len(calls))
			}
			return record("Finalizing", "two")
		})
		t.Logf("finalize calls: %d before the change, %d after", n, len(finalizeCalls()))
	}) {
		return
	}

	t.Run("the registry lets go: the Registration and its ConfigMap go", func(t *testing.T) {
		// The registry lets go; the next change finalizes the parent.
		store.hold(false)
		if _, err := regs.Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"annotations":{"poke":"1"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, func() error {
			_, err := regs.Get(ctx, "web", metav1.GetOptions{})
			return gone(err, "the Registration")
		})
		if _, err := entry(); err == nil {
			t.Errorf("the registry entry outlived its Registration")
		}
		eventually(t, time.Minute, func() error {
			_, err := getConfigMap(ctx, ns, finalizecleanup.ChildName("web"))
			return gone(err, "the Registration's ConfigMap")
		})
		t.Logf("%d hook calls in all (%d finalize)", rec.count(ns, "web"), len(finalizeCalls()))
	})
}
