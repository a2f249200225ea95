package e2e

import (
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

var (
	migratedGVR    = schema.GroupVersionResource{Group: "e2e.universalcontroller.dev", Version: "v1", Resource: "migrateds"}
	mcCompositeGVR = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"}
	mcDecoratorGVR = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "decoratorcontrollers"}
	configMapGVR   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secretGVR      = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// migratedHook is a Metacontroller webhook: spec.copies ConfigMaps, and
// their count in the status; finalize answers finalized.
func migratedHook(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req hooks.SyncRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := map[string]any{"finalized": true}
		if !req.Finalizing {
			children := migratedChildren(req.Parent)
			resp = map[string]any{"status": map[string]any{"copies": len(children) - 1}, "children": children}
		}
		_ = json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// migratedChildren are the children a Migrated parent's hook desires:
// spec.copies ConfigMaps (re-created on a change), and a Secret (updated in
// place) holding spec.version and spec.note.
func migratedChildren(parent *unstructured.Unstructured) []*unstructured.Unstructured {
	copies, _, _ := unstructured.NestedInt64(parent.Object, "spec", "copies")
	data := map[string]any{}
	for _, field := range []string{"version", "note"} {
		if v, _, _ := unstructured.NestedString(parent.Object, "spec", field); v != "" {
			data[field] = base64.StdEncoding.EncodeToString([]byte(v))
		}
	}
	out := []*unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
		"metadata": map[string]any{"name": parent.GetName()}, "data": data,
	}}}
	for i := range copies {
		out = append(out, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", parent.GetName(), i)},
			"data":     map[string]any{"copy": fmt.Sprint(i)},
		}})
	}
	return out
}

// A parent and its children as Metacontroller left them are adopted as
// they are when uc (--metacontroller-api) serves the CompositeController
// that made them, the object unchanged: no child re-created although their
// update method is Recreate, Metacontroller's finalizer kept and honoured.
func TestMetacontrollerCompositeControllerAdoptsWithoutRecreating(t *testing.T) {
	ctx := t.Context()
	installCRD(t, "test/e2e/testdata/migrated-crd.yaml", migratedGVR)
	ns := namespace(t)
	const name = "migrated-controller"
	finalizer := "metacontroller.io/compositecontroller-" + name

	// What Metacontroller left: the parent with its finalizer, and its
	// children, created with Metacontroller's field manager, labelled and
	// controlled as Metacontroller does.
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "e2e.universalcontroller.dev/v1", "kind": "Migrated",
		"metadata": map[string]any{"name": "p", "namespace": ns, "finalizers": []any{finalizer}},
		"spec":     map[string]any{"copies": int64(2), "version": "1", "note": "x"},
	}}
	parent, err := env.dyn.Resource(migratedGVR).Namespace(ns).Create(ctx, parent, metav1.CreateOptions{FieldManager: "metacontroller"})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	uids := map[string]types.UID{}
	for _, child := range migratedChildren(parent) {
		child.SetLabels(map[string]string{"controller-uid": string(parent.GetUID())})
		child.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: parent.GetAPIVersion(), Kind: parent.GetKind(),
			Name: parent.GetName(), UID: parent.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}})
		gvr := map[string]schema.GroupVersionResource{"ConfigMap": configMapGVR, "Secret": secretGVR}[child.GetKind()]
		out, err := env.dyn.Resource(gvr).Namespace(ns).Create(ctx, child, metav1.CreateOptions{FieldManager: "metacontroller"})
		if err != nil {
			t.Fatal(err)
		}
		uids[out.GetName()] = out.GetUID()
	}

	// The CompositeController, as Metacontroller's users write it.
	hook := migratedHook(t)
	createClusterScoped(t, mcCompositeGVR, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"generateSelector": true,
			"parentResource":   map[string]any{"apiVersion": "e2e.universalcontroller.dev/v1", "resource": "migrateds"},
			"childResources": []any{
				map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "Recreate"}},
				map[string]any{"apiVersion": "v1", "resource": "secrets", "updateStrategy": map[string]any{"method": "InPlace"}},
			},
			"hooks": map[string]any{
				"sync":     map[string]any{"webhook": map[string]any{"url": hook.URL + "/sync"}},
				"finalize": map[string]any{"webhook": map[string]any{"url": hook.URL + "/finalize"}},
			},
		},
	}})

	if !t.Run("adopt the children without re-creating them", func(t *testing.T) {
		// The parent converges: the hook's status, Metacontroller's finalizer
		// alone, the same children.
		eventually(t, time.Minute, func() error {
			p, err := env.dyn.Resource(migratedGVR).Namespace(ns).Get(ctx, "p", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if copies, _, _ := unstructured.NestedInt64(p.Object, "status", "copies"); copies != 2 {
				return fmt.Errorf("status %v: want the hook's copies: 2", p.Object["status"])
			}
			if f := p.GetFinalizers(); !slices.Equal(f, []string{finalizer}) {
				return fmt.Errorf("finalizers %v: want Metacontroller's alone", f)
			}
			return nil
		})
		recreated := 0
		for childName, uid := range uids {
			gvr := configMapGVR
			if childName == "p" {
				gvr = secretGVR
			}
			cm, err := env.dyn.Resource(gvr).Namespace(ns).Get(ctx, childName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("child %s: %v", childName, err)
			}
			if cm.GetUID() != uid {
				recreated++
			}
		}
		t.Logf("children re-created: %d of %d", recreated, len(uids))
		if recreated != 0 {
			t.Errorf("%d children re-created: want 0", recreated)
		}
	}) {
		return
	}

	if !t.Run("a new desired state reaches the children", func(t *testing.T) {
		// A change of the hook's desired state still reaches the children: a
		// third copy is created next to the adopted ones, and the Secret
		// updated in place loses the note Metacontroller wrote, which the hook
		// no longer desires: uc took Metacontroller's fields over.
		if _, err := env.dyn.Resource(migratedGVR).Namespace(ns).Patch(ctx, "p", types.MergePatchType, []byte(`{"spec":{"copies":3,"version":"2","note":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, func() error {
			if _, err := env.dyn.Resource(configMapGVR).Namespace(ns).Get(ctx, "p-2", metav1.GetOptions{}); err != nil {
				return err
			}
			s, err := env.dyn.Resource(secretGVR).Namespace(ns).Get(ctx, "p", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if data, _, _ := unstructured.NestedStringMap(s.Object, "data"); len(data) != 1 || data["version"] != "Mg==" {
				return fmt.Errorf("secret data %v: want version 2 alone", data)
			}
			return nil
		})
	}) {
		return
	}

	t.Run("the finalize hook lets Metacontroller's finalizer go", func(t *testing.T) {
		// Deleting the parent runs the finalize hook, which lets
		// Metacontroller's finalizer go.
		if err := env.dyn.Resource(migratedGVR).Namespace(ns).Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, func() error {
			p, err := env.dyn.Resource(migratedGVR).Namespace(ns).Get(ctx, "p", metav1.GetOptions{})
			if err == nil {
				return fmt.Errorf("parent still there, finalizers %v", p.GetFinalizers())
			}
			return nil
		})
	})
}

// An object a Metacontroller DecoratorController decorated, and its
// attachment, are adopted as they are when uc serves the
// DecoratorController, the object unchanged: the attachment is not
// re-created although its update method is Recreate, and Metacontroller's
// finalizer is kept, then taken off once the object opts out.
func TestMetacontrollerDecoratorControllerAdoptsWithoutRecreating(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	const name = "migrated-decorator"
	finalizer := "metacontroller.io/decoratorcontroller-" + name
	attachment := func(object string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
			"metadata": map[string]any{"name": object + "-att"}, "data": map[string]any{"k": "dg=="}}
	}

	// What Metacontroller left: the decorated object with its finalizer and
	// the hook's label, and its attachment, marked as Metacontroller marks
	// them.
	obj, err := env.dyn.Resource(configMapGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "decorated", "namespace": ns, "finalizers": []any{finalizer},
			"annotations": map[string]any{"e2e.universalcontroller.dev/decorate": "yes"},
			"labels":      map[string]any{"decorated": "yes"}},
	}}, metav1.CreateOptions{FieldManager: "metacontroller"})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	att := &unstructured.Unstructured{Object: attachment(obj.GetName())}
	att.SetAnnotations(map[string]string{"metacontroller.k8s.io/decorator-controller": name})
	att.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: obj.GetName(), UID: obj.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}})
	att, err = env.dyn.Resource(secretGVR).Namespace(ns).Create(ctx, att, metav1.CreateOptions{FieldManager: "metacontroller"})
	if err != nil {
		t.Fatal(err)
	}

	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Object     *unstructured.Unstructured `json:"object"`
			Finalizing bool                       `json:"finalizing"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := map[string]any{"finalized": true, "attachments": []any{}}
		if !req.Finalizing {
			resp = map[string]any{"labels": map[string]any{"decorated": "yes", "synced": "yes"}, "attachments": []any{attachment(req.Object.GetName())}}
		}
		_ = json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(hook.Close)
	createClusterScoped(t, mcDecoratorGVR, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"resources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
				"annotationSelector": map[string]any{"matchAnnotations": map[string]any{"e2e.universalcontroller.dev/decorate": "yes"}}}},
			"attachments": []any{map[string]any{"apiVersion": "v1", "resource": "secrets", "updateStrategy": map[string]any{"method": "Recreate"}}},
			"hooks": map[string]any{
				"sync":     map[string]any{"webhook": map[string]any{"url": hook.URL + "/sync"}},
				"finalize": map[string]any{"webhook": map[string]any{"url": hook.URL + "/finalize"}},
			},
		},
	}})

	if !t.Run("adopt the attachment without re-creating it", func(t *testing.T) {
		// The hook's reply is applied whole: its new label is there.
		eventually(t, time.Minute, func() error {
			o, err := env.dyn.Resource(configMapGVR).Namespace(ns).Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if o.GetLabels()["synced"] != "yes" {
				return fmt.Errorf("labels %v: want the hook's synced=yes", o.GetLabels())
			}
			return nil
		})
		cur, err := env.dyn.Resource(secretGVR).Namespace(ns).Get(ctx, att.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cur.GetUID() != att.GetUID() {
			t.Errorf("attachment re-created (UID %s, was %s)", cur.GetUID(), att.GetUID())
		}
		o, err := env.dyn.Resource(configMapGVR).Namespace(ns).Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if f := o.GetFinalizers(); !slices.Equal(f, []string{finalizer}) {
			t.Errorf("finalizers %v: want Metacontroller's alone", f)
		}
	}) {
		return
	}

	t.Run("opting out finalizes", func(t *testing.T) {
		// Opting out finalizes: the attachment goes, and Metacontroller's
		// finalizer with it.
		if _, err := env.dyn.Resource(configMapGVR).Namespace(ns).Patch(ctx, obj.GetName(), types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"e2e.universalcontroller.dev/decorate":null}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, func() error {
			o, err := env.dyn.Resource(configMapGVR).Namespace(ns).Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if f := o.GetFinalizers(); len(f) > 0 {
				return fmt.Errorf("finalizers %v", f)
			}
			if _, err := env.dyn.Resource(secretGVR).Namespace(ns).Get(ctx, att.GetName(), metav1.GetOptions{}); err == nil {
				return fmt.Errorf("attachment still there")
			}
			return nil
		})
	})
}

var (
	mcRevisionGVR = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "controllerrevisions"}
	podGVR        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// mcControllerRevision is a ControllerRevision as Metacontroller v4.17
// writes it for a parent of a CompositeController with generateSelector:
// named after the parent's resource and a hash of its UID and parentPatch,
// labelled with controller-uid and the parent's resource, controlled by the
// parent, naming the Pods on it.
func mcControllerRevision(parent *unstructured.Unstructured, patch map[string]any, pods ...string) *unstructured.Unstructured {
	raw, _ := json.Marshal(patch)
	sum := sha1.Sum(append([]byte(parent.GetUID()), raw...))
	names := make([]any, len(pods))
	for i, p := range pods {
		names[i] = p
	}
	yes := true
	rev := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion":  "metacontroller.k8s.io/v1alpha1",
		"kind":        "ControllerRevision",
		"parentPatch": patch,
		"children":    []any{map[string]any{"apiGroup": "", "kind": "Pod", "names": names}},
	}}
	rev.SetName(compositeGVR.Resource + "." + compositeGVR.Group + "-" + hex.EncodeToString(sum[:]))
	rev.SetNamespace(parent.GetNamespace())
	rev.SetLabels(map[string]string{
		"controller-uid":                 string(parent.GetUID()),
		"metacontroller.k8s.io/apiGroup": compositeGVR.Group,
		"metacontroller.k8s.io/resource": compositeGVR.Resource,
	})
	rev.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: parent.GetAPIVersion(), Kind: parent.GetKind(),
		Name: parent.GetName(), UID: parent.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}})
	return rev
}

// A rolling update Metacontroller left half-way goes on from its
// ControllerRevisions when uc (--metacontroller-api) serves the
// CompositeController: of Pods a, b, c (RollingRecreate, Ready checked),
// Metacontroller had moved a to the parent's new spec; uc re-creates no Pod
// on taking over, then moves b, and c only once b is Ready again, and
// Metacontroller's revisions give way to uc's.
func TestMetacontrollerRollingUpdateContinues(t *testing.T) {
	ctx := t.Context()
	installCRD(t, "test/e2e/testdata/composite-crd.yaml", compositeGVR)
	ns := namespace(t)
	const name = "mc-rolling"
	spec := func(image string) map[string]any {
		return map[string]any{"children": []any{pod("a", "mcroll", image), pod("b", "mcroll", image), pod("c", "mcroll", image)}}
	}

	// What Metacontroller left: the parent at its new spec, a on it, b and
	// c still on the old one, and its two revisions saying so.
	parent, err := env.dyn.Resource(compositeGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "e2e.universalcontroller.dev/v1", "kind": "Composite",
		"metadata": map[string]any{"name": "p", "namespace": ns, "labels": map[string]any{controllerLabel: name}},
		"spec":     spec("v2"),
	}}, metav1.CreateOptions{FieldManager: "metacontroller"})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	for _, p := range []map[string]any{pod("a", "mcroll", "v2"), pod("b", "mcroll", "v1"), pod("c", "mcroll", "v1")} {
		child := &unstructured.Unstructured{Object: p}
		child.SetLabels(map[string]string{"app": "mcroll", "controller-uid": string(parent.GetUID())})
		child.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: parent.GetAPIVersion(), Kind: parent.GetKind(),
			Name: parent.GetName(), UID: parent.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}})
		if _, err := env.dyn.Resource(podGVR).Namespace(ns).Create(ctx, child, metav1.CreateOptions{FieldManager: "metacontroller"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, rev := range []*unstructured.Unstructured{
		mcControllerRevision(parent, map[string]any{"spec": spec("v1")}, "b", "c"),
		mcControllerRevision(parent, map[string]any{"spec": parent.Object["spec"]}, "a"),
	} {
		if _, err := env.dyn.Resource(mcRevisionGVR).Namespace(ns).Create(ctx, rev, metav1.CreateOptions{FieldManager: "metacontroller"}); err != nil {
			t.Fatal(err)
		}
	}
	var before map[string]string
	eventually(t, time.Minute, func() (err error) {
		before, err = podImages(ctx, ns, "a", "b", "c")
		return err
	})

	// Record, each time uc begins to move a Pod (deletes it), whether the
	// Pods already moved are back, on v2 and Ready; and every Pod created.
	var mu sync.Mutex
	var moved, created, violations []string
	factory := informers.NewSharedInformerFactoryWithOptions(env.kube, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	initial := map[types.UID]bool{}
	seen := map[types.UID]bool{}
	moving := func(p *corev1.Pod) {
		mu.Lock()
		defer mu.Unlock()
		if !initial[p.UID] || seen[p.UID] {
			return
		}
		seen[p.UID] = true
		for _, name := range append([]string{"a"}, moved...) {
			obj, ok, _ := inf.GetStore().GetByKey(ns + "/" + name)
			if !ok || obj.(*corev1.Pod).Spec.Containers[0].Image != "v2" || !podReady(obj.(*corev1.Pod)) {
				violations = append(violations, fmt.Sprintf("%s moved while %s was not back on v2 and Ready", p.Name, name))
			}
		}
		moved = append(moved, p.Name)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			mu.Lock()
			defer mu.Unlock()
			if p := obj.(*corev1.Pod); !initial[p.UID] {
				created = append(created, p.Name)
			}
		},
		UpdateFunc: func(_, n any) {
			if p := n.(*corev1.Pod); p.DeletionTimestamp != nil {
				moving(p)
			}
		},
		DeleteFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				moving(p)
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	for _, p := range before {
		initial[types.UID(strings.SplitN(p, "@", 2)[1])] = true
	}
	mu.Unlock()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	t.Cleanup(factory.Shutdown)

	// The CompositeController, as Metacontroller's users write it; its
	// sync hook, on the bus, echoes the parent's spec.children.
	serveHooks(t, bus.CompositeController(name), newRecorder().handler(hooks.Sync, echo))
	createClusterScoped(t, mcCompositeGVR, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"generateSelector": true,
			"parentResource": map[string]any{"apiVersion": "e2e.universalcontroller.dev/v1", "resource": "composites",
				"labelSelector": map[string]any{"matchLabels": map[string]any{controllerLabel: name}}},
			"childResources": []any{map[string]any{"apiVersion": "v1", "resource": "pods", "updateStrategy": map[string]any{
				"method": "RollingRecreate", "statusChecks": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}}}},
			"hooks": map[string]any{"sync": map[string]any{}},
		},
	}})

	if !t.Run("uc moves b, then c, and re-creates no other Pod", func(t *testing.T) {
		var after map[string]string
		eventually(t, 2*time.Minute, func() (err error) {
			after, err = rolledOut(ctx, ns, "v2", "a", "b", "c")
			return err
		})
		if after["a"] != before["a"] {
			t.Errorf("pod a, on the new spec already, was re-created: %s → %s", before["a"], after["a"])
		}
		mu.Lock()
		defer mu.Unlock()
		t.Logf("pods moved in the order %v; pods created %v", moved, created)
		if !slices.Equal(moved, []string{"b", "c"}) {
			t.Errorf("pods moved in the order %v, want b, c", moved)
		}
		slices.Sort(created)
		if !slices.Equal(created, []string{"b", "c"}) {
			t.Errorf("pods created %v, want b and c once each (a stays as Metacontroller left it)", created)
		}
		for _, v := range violations {
			t.Error(v)
		}
	}) {
		return
	}

	t.Run("Metacontroller's revisions give way to uc's", func(t *testing.T) {
		// One record of the rollout: uc's, every Pod on the latest revision;
		// Metacontroller's are gone.
		eventually(t, 30*time.Second, func() error {
			theirs, err := env.dyn.Resource(mcRevisionGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(theirs.Items) != 0 {
				return fmt.Errorf("%d of Metacontroller's revisions left", len(theirs.Items))
			}
			ours, err := revisionNames(ctx, ns)
			if err != nil {
				return err
			}
			if len(ours) != 1 || !slices.Equal(slices.Collect(maps.Values(ours))[0], []string{"a", "b", "c"}) {
				return fmt.Errorf("uc's revisions %v, want the latest with a, b, c", ours)
			}
			return nil
		})
	})
}
