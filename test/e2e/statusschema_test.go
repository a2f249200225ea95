package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
	"universalcontroller.dev/uc/test/manifests"
)

// The parent kinds of testdata/statusschema-crds.yaml.
var (
	globalSettingGVR = statusSchemaGVR("globalsettings")
	pipelineGVR      = statusSchemaGVR("pipelines")
	cacheGVR         = statusSchemaGVR("caches")
	sandboxGVR       = statusSchemaGVR("sandboxes")
)

func statusSchemaGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "statusschema.e2e.universalcontroller.dev", Version: "v1", Resource: resource}
}

// copiesHook serves a parent of testdata/statusschema-crds.yaml: spec.copies
// ConfigMaps named <parent>-<i> (a cluster-scoped parent's in
// spec.namespace), and the status status(observed ConfigMaps, spec.mode)
// makes, in the shape its CRD declares. Mode "bad-kind" adds a Secret, a
// kind the controllers do not declare.
func copiesHook(status func(observed int64, mode string) map[string]any) hook.Handler {
	return hook.Func(hooks.Sync, func(_ context.Context, req *hooks.SyncRequest) (*hooks.SyncResponse, error) {
		copies, _, _ := unstructured.NestedInt64(req.Parent.Object, "spec", "copies")
		mode, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "mode")
		ns := req.Parent.GetNamespace()
		if ns == "" {
			ns, _, _ = unstructured.NestedString(req.Parent.Object, "spec", "namespace")
		}
		var children []*unstructured.Unstructured
		for i := range copies {
			children = append(children, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", req.Parent.GetName(), i), "namespace": ns},
				"data":     map[string]any{"copy": fmt.Sprint(i)},
			}})
		}
		if mode == "bad-kind" {
			children = append(children, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": req.Parent.GetName(), "namespace": ns}}})
		}
		observed := int64(len(req.Children[hooks.GroupKey("ConfigMap", "v1")]))
		return &hooks.SyncResponse{Status: status(observed, mode), Children: children}, nil
	})
}

// installStatusSchemas installs the parent kinds, serves their hooks and
// registers their controllers.
func installStatusSchemas(t *testing.T) {
	t.Helper()
	if err := applyFile(t.Context(), filepath.Join(env.root, "test/e2e/testdata/statusschema-crds.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, gvr := range []schema.GroupVersionResource{globalSettingGVR, pipelineGVR, cacheGVR, sandboxGVR} {
		eventually(t, 30*time.Second, func() error {
			_, err := env.dyn.Resource(gvr).List(t.Context(), metav1.ListOptions{Limit: 1})
			return err
		})
	}
	serveHooks(t, "globalsetting-controller", copiesHook(func(observed int64, mode string) map[string]any {
		if mode == "bad-status" { // a string where the schema says integer
			return map[string]any{"working": true, "actual_copies": "three"}
		}
		return map[string]any{"working": true, "actual_copies": observed}
	}))
	serveHooks(t, "pipeline-controller", copiesHook(func(observed int64, _ string) map[string]any {
		// reason and message: the CRD's conditions do not declare them.
		return map[string]any{"replicas": observed, "conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "AllCopies", "message": "every copy is there"}}}
	}))
	serveHooks(t, "cache-controller", copiesHook(func(int64, string) map[string]any {
		return map[string]any{"phase": "Ready"}
	}))
	serveHooks(t, "sandbox-controller", copiesHook(func(observed int64, _ string) map[string]any {
		return map[string]any{"copies": observed, "detail": map[string]any{"seen": observed}}
	}))
	registerManifest(t, "test/e2e/testdata/statusschema-controllers.yaml", nil)
}

// TestStatusSchemas: whatever the parent's status schema — closed to the
// hook's fields on a cluster-scoped parent, conditions of type and status
// only, no observedGeneration, or open — the parent converges: its
// children are applied, the hook's status is written as far as the schema
// declares it, and uc's observedGeneration and Synced condition go in
// where, and as far as, the schema admits them.
func TestStatusSchemas(t *testing.T) {
	ctx := t.Context()
	installStatusSchemas(t)
	ns := namespace(t)
	createGlobalSetting(t, ns, ns, 2)
	for _, p := range []struct {
		gvr  schema.GroupVersionResource
		kind string
	}{{pipelineGVR, "Pipeline"}, {cacheGVR, "Cache"}, {sandboxGVR, "Sandbox"}} {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": p.gvr.GroupVersion().String(), "kind": p.kind,
			"metadata": map[string]any{"name": p.gvr.Resource, "namespace": ns},
			"spec":     map[string]any{"copies": int64(2)},
		}}
		if _, err := env.dyn.Resource(p.gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	synced := map[string]any{"type": "Synced", "status": "True"}
	for _, tc := range []struct {
		name       string
		gvr        schema.GroupVersionResource
		parentNS   string
		parent     string
		wantStatus func(generation int64) map[string]any
	}{
		{"closed status, cluster-scoped parent", globalSettingGVR, "", ns, func(int64) map[string]any {
			return map[string]any{"working": true, "actual_copies": int64(2)}
		}},
		{"conditions of type and status", pipelineGVR, ns, "pipelines", func(int64) map[string]any {
			return map[string]any{"replicas": int64(2), "conditions": []any{map[string]any{"type": "Ready", "status": "True"}, synced}}
		}},
		{"no observedGeneration", cacheGVR, ns, "caches", func(gen int64) map[string]any {
			return map[string]any{"phase": "Ready", "conditions": []any{map[string]any{"type": "Synced", "status": "True",
				"reason": "Applied", "message": "the latest hook reply was applied", "observedGeneration": gen}}}
		}},
		{"status preserving unknown fields", sandboxGVR, ns, "sandboxes", func(gen int64) map[string]any {
			return map[string]any{"copies": int64(2), "detail": map[string]any{"seen": int64(2)}, "observedGeneration": gen,
				"conditions": []any{map[string]any{"type": "Synced", "status": "True",
					"reason": "Applied", "message": "the latest hook reply was applied", "observedGeneration": gen}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eventually(t, time.Minute, func() error {
				if err := configMapsExist(ctx, ns, tc.parent, 2); err != nil {
					return err
				}
				p, err := env.dyn.Resource(tc.gvr).Namespace(tc.parentNS).Get(ctx, tc.parent, metav1.GetOptions{})
				if err != nil {
					return err
				}
				status, _, _ := unstructured.NestedMap(p.Object, "status")
				withoutTimes(status)
				if want := tc.wantStatus(p.GetGeneration()); !equality.Semantic.DeepEqual(status, want) {
					return fmt.Errorf("status %v, want %v", status, want)
				}
				return nil
			})
		})
	}
	// The hook's condition fields the Pipeline's schema does not declare
	// are named in a Warning Event.
	eventually(t, 30*time.Second, func() error {
		return hasEvent(ctx, ns, "pipelines", corev1.EventTypeWarning, "StatusFieldsPruned", "status.conditions[0].reason")
	})

	// The schema follows its CRD: once the author declares the conditions'
	// reason and message, the next sync writes them, the hook's and uc's.
	widenPipelineConditions(t)
	if _, err := env.dyn.Resource(pipelineGVR).Namespace(ns).Patch(ctx, "pipelines", types.MergePatchType, []byte(`{"spec":{"copies":3}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		p, err := env.dyn.Resource(pipelineGVR).Namespace(ns).Get(ctx, "pipelines", metav1.GetOptions{})
		if err != nil {
			return err
		}
		status, _, _ := unstructured.NestedMap(p.Object, "status")
		withoutTimes(status)
		want := map[string]any{"replicas": int64(3), "conditions": []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "AllCopies", "message": "every copy is there"},
			map[string]any{"type": "Synced", "status": "True", "reason": "Applied", "message": "the latest hook reply was applied"}}}
		if !equality.Semantic.DeepEqual(status, want) {
			return fmt.Errorf("status %v, want %v", status, want)
		}
		return nil
	})
}

// widenPipelineConditions declares reason and message in the Pipeline's
// conditions, until the test ends.
func widenPipelineConditions(t *testing.T) {
	t.Helper()
	path := filepath.Join(env.root, "test/e2e/testdata/statusschema-crds.yaml")
	objs, err := manifests.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range objs {
		if crd.GetName() != pipelineGVR.GroupResource().String() {
			continue
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		items := []string{"schema", "openAPIV3Schema", "properties", "status", "properties", "conditions", "items", "properties"}
		props, _, _ := unstructured.NestedMap(versions[0].(map[string]any), items...)
		props["reason"] = map[string]any{"type": "string"}
		props["message"] = map[string]any{"type": "string"}
		if err := unstructured.SetNestedMap(versions[0].(map[string]any), props, items...); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
			t.Fatal(err)
		}
		if err := applyObject(t.Context(), newMapper(), crd); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := applyFile(context.Background(), path); err != nil {
			t.Errorf("restore the CRDs: %v", err)
		}
	})
}

// TestStatusSchemaFailures: where a parent's status has no room for uc's
// Synced condition, a failed sync shows as a Warning Event on the parent
// and on its UniversalController (the count of failing parents, the last
// reason), and its recovery as a Normal Event; a status the apiserver
// refuses is reported, naming the field, and neither keeps the children
// from being applied nor is retried.
func TestStatusSchemaFailures(t *testing.T) {
	ctx := t.Context()
	installStatusSchemas(t)
	ns := namespace(t)
	name := ns
	createGlobalSetting(t, name, ns, 1)
	eventually(t, time.Minute, func() error { return configMapsExist(ctx, ns, name, 1) })
	setSpec := func(spec string) {
		t.Helper()
		if _, err := env.dyn.Resource(globalSettingGVR).Patch(ctx, name, types.MergePatchType, []byte(`{"spec":`+spec+`}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	setSpec(`{"mode":"bad-kind"}`)
	eventually(t, time.Minute, func() error {
		if err := hasEvent(ctx, "", name, corev1.EventTypeWarning, "InvalidHookReply", "kind not declared"); err != nil {
			return err
		}
		return parentsFailing(ctx, "globalsetting-controller", 1, name, "InvalidHookReply")
	})
	setSpec(`{"mode":"good"}`)
	eventually(t, time.Minute, func() error {
		if err := hasEvent(ctx, "", name, corev1.EventTypeNormal, "Synced", "applied"); err != nil {
			return err
		}
		return parentsFailing(ctx, "globalsetting-controller", 0, name, "InvalidHookReply")
	})

	// A status the apiserver refuses: the children of the same reply are
	// applied, the refusal names the field.
	setSpec(`{"mode":"bad-status","copies":3}`)
	eventually(t, time.Minute, func() error {
		if err := configMapsExist(ctx, ns, name, 3); err != nil {
			return err
		}
		if err := hasEvent(ctx, "", name, corev1.EventTypeWarning, "StatusWriteFailed", "actual_copies"); err != nil {
			return err
		}
		return parentsFailing(ctx, "globalsetting-controller", 1, name, "StatusWriteFailed")
	})
	setSpec(`{"mode":"good"}`)
	eventually(t, time.Minute, func() error {
		p, err := env.dyn.Resource(globalSettingGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n, _, _ := unstructured.NestedInt64(p.Object, "status", "actual_copies"); n != 3 {
			return fmt.Errorf("status.actual_copies %d, want 3", n)
		}
		return parentsFailing(ctx, "globalsetting-controller", 0, name, "StatusWriteFailed")
	})
	// Not retried: a refused status is reported, not an apply that failed.
	log, err := os.ReadFile(filepath.Join(env.uc.dir, "uc.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "apply failed; will retry") && strings.Contains(line, "controller=globalsetting-controller") {
			t.Fatalf("an apply of a GlobalSetting was retried: %s", line)
		}
	}
}

// createGlobalSetting creates a GlobalSetting with copies ConfigMaps in ns,
// deleted when the test ends.
func createGlobalSetting(t *testing.T, name, ns string, copies int64) {
	t.Helper()
	createClusterScoped(t, globalSettingGVR, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": globalSettingGVR.GroupVersion().String(), "kind": "GlobalSetting",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"namespace": ns, "copies": copies},
	}})
}

// configMapsExist fails unless the ConfigMaps <parent>-0 … <parent>-(n-1)
// exist in ns.
func configMapsExist(ctx context.Context, ns, parent string, n int) error {
	for i := range n {
		if _, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, fmt.Sprintf("%s-%d", parent, i), metav1.GetOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// withoutTimes drops the lastTransitionTime of every condition of status.
func withoutTimes(status map[string]any) {
	list, _ := status["conditions"].([]any)
	for _, c := range list {
		if m, ok := c.(map[string]any); ok {
			delete(m, "lastTransitionTime")
		}
	}
}

// hasEvent fails unless an Event of type and reason whose message contains
// want was recorded on the object named name in ns ("": a cluster-scoped
// object, whose Events are in default).
func hasEvent(ctx context.Context, ns, name, typ, reason, want string) error {
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	events, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
		"involvedObject.name": name, "type": typ, "reason": reason}).String()})
	if err != nil {
		return err
	}
	for _, e := range events.Items {
		if strings.Contains(e.Message, want) {
			return nil
		}
	}
	return fmt.Errorf("no %s Event %s on %s naming %q among %d", typ, reason, name, want, len(events.Items))
}

// parentsFailing fails unless the controller's status counts n failing
// parents and its last failure is parent's, for reason.
func parentsFailing(ctx context.Context, controller string, n int32, parent, reason string) error {
	u, err := env.dyn.Resource(v1alpha1.Resource).Get(ctx, controller, metav1.GetOptions{})
	if err != nil {
		return err
	}
	raw, _, _ := unstructured.NestedMap(u.Object, "status")
	count, found, _ := unstructured.NestedInt64(raw, "parentsFailing")
	last, _, _ := unstructured.NestedStringMap(raw, "lastFailure")
	if !found || int32(count) != n || last["parent"] != parent || last["reason"] != reason {
		return fmt.Errorf("%s: parentsFailing %d (set: %v), lastFailure %v; want %d, %s for %s", controller, count, found, last, n, reason, parent)
	}
	return nil
}
