package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

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
}
