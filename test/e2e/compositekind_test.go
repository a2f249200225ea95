package e2e

// The test-only Composite kind (testdata/composite-crd.yaml) and its
// controllers: each test registers its own UniversalController for the
// Composites labelled with its name, served by the echo hook, which
// replies what the parent's spec says; a test says what the hook replies
// by editing the parent.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// compositeGVR is the resource of the test-only Composite kind.
var compositeGVR = schema.GroupVersionResource{Group: "e2e.universalcontroller.dev", Version: "v1", Resource: "composites"}

// controllerLabel on a Composite says which test controller handles it.
const controllerLabel = "e2e.universalcontroller.dev/controller"

// registerComposite registers a copy of testdata/composite-controller.yaml
// named name, for the Composites labelled with that name, changed by edit,
// and serves its sync hook with the echo hook. It returns the recorder of
// the hook's calls.
func registerComposite(t *testing.T, name string, edit func(spec map[string]any)) *recorder {
	t.Helper()
	rec := newRecorder()
	registerCompositeWith(t, name, rec.handler(hooks.Sync, echo), edit)
	return rec
}

// registerCompositeWith registers a copy of
// testdata/composite-controller.yaml named name, for the Composites
// labelled with that name, changed by edit, and serves its sync hook with
// sync.
func registerCompositeWith(t *testing.T, name string, sync hook.Handler, edit func(spec map[string]any)) {
	t.Helper()
	installCRD(t, "test/e2e/testdata/composite-crd.yaml", compositeGVR)
	serveHooks(t, name, sync)
	registerCompositeController(t, name, edit)
}

// registerCompositeController registers (or updates) a copy of
// testdata/composite-controller.yaml named name, for the Composites
// labelled with that name, changed by edit (nil: none).
func registerCompositeController(t *testing.T, name string, edit func(spec map[string]any)) {
	t.Helper()
	registerManifest(t, "test/e2e/testdata/composite-controller.yaml", func(u *unstructured.Unstructured) {
		u.SetName(name)
		_ = unstructured.SetNestedField(u.Object, name, "spec", "parentResource", "labelSelector", "matchLabels", controllerLabel)
		if edit != nil {
			spec, _, _ := unstructured.NestedMap(u.Object, "spec")
			edit(spec)
			u.Object["spec"] = spec
		}
	})
}

// echo is the Composites' sync hook: it replies what the parent's spec says.
// spec.children are the desired children, spec.status the status (default
// {"echo": true}), spec.resyncAfterSeconds is passed on, and the fields of
// spec.extra are added to the reply as they are.
func echo(_ context.Context, req *hooks.SyncRequest) (any, error) {
	spec, _, _ := unstructured.NestedMap(req.Parent.Object, "spec")
	reply := map[string]any{"children": []any{}, "status": map[string]any{"echo": true}}
	if c, ok := spec["children"]; ok && c != nil {
		reply["children"] = c
	}
	if s, ok := spec["status"]; ok {
		reply["status"] = s
	}
	if r, ok := spec["resyncAfterSeconds"]; ok {
		reply["resyncAfterSeconds"] = r
	}
	if extra, ok := spec["extra"].(map[string]any); ok {
		maps.Copy(reply, extra)
	}
	return reply, nil
}

// selectApp is a parent's spec.selector for the label app=value.
func selectApp(value string) map[string]any {
	return map[string]any{"matchLabels": map[string]any{"app": value}}
}

// createComposite creates a Composite for the test controller named
// controller, failing t if it cannot.
func createComposite(t *testing.T, ns, name, controller string, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "e2e.universalcontroller.dev/v1", "kind": "Composite",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{controllerLabel: controller}},
		"spec":     spec,
	}}
	created, err := env.dyn.Resource(compositeGVR).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// patchComposite merge-patches a Composite.
func patchComposite(t *testing.T, ns, name string, patch map[string]any) *unstructured.Unstructured {
	t.Helper()
	b, _ := json.Marshal(patch)
	obj, err := env.dyn.Resource(compositeGVR).Namespace(ns).Patch(t.Context(), name, types.MergePatchType, b, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// getComposite gets a Composite.
func getComposite(ctx context.Context, ns, name string) (*unstructured.Unstructured, error) {
	return env.dyn.Resource(compositeGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// compositeSynced checks the Composite's latest generation was applied.
func compositeSynced(ctx context.Context, ns, name string) error {
	p, err := getComposite(ctx, ns, name)
	if err != nil {
		return err
	}
	if err := syncedTrue(p); err != nil {
		return err
	}
	if c := condition(p, "Synced"); fmt.Sprint(c["observedGeneration"]) != fmt.Sprint(p.GetGeneration()) {
		return fmt.Errorf("%s: Synced is for generation %v, the parent is at %d", name, c["observedGeneration"], p.GetGeneration())
	}
	return nil
}
