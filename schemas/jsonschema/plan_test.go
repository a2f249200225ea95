package jsonschema

import (
	"encoding/json"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/applier"
	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// liveObjects is an applier.Cache of a few live objects.
type liveObjects []*unstructured.Unstructured

func (l liveObjects) Owned(_ schema.GroupVersionResource, _ string, owner types.UID) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range l {
		if ref := metav1.GetControllerOf(o); ref != nil && ref.UID == owner {
			out = append(out, o)
		}
	}
	return out, nil
}

func (l liveObjects) Orphans(schema.GroupVersionResource, string) ([]*unstructured.Unstructured, error) {
	return nil, nil
}

func (l liveObjects) Object(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	for _, o := range l {
		if o.GetNamespace() == namespace && o.GetName() == name {
			return o, nil
		}
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}

// TestPlansAreValid: the plans the applier makes of the Foo example's
// replies — creating its Deployment, updating it, deleting it, a finalize
// reply — are valid plan.json documents, as is a rejected reply's.
func TestPlansAreValid(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Kind: "Foo"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	ctl, err := registry.ControllerOf(fooController(t), func(rule v1alpha1.ResourceRule) (registry.Resource, error) {
		return registry.ResolveWith(mapper, rule)
	}, func(registry.Resource) (bool, error) { return false, nil })
	if err != nil {
		t.Fatal(err)
	}
	parent := fooParent(t)
	deployment := observedDeployment(t, parent)
	deployment.SetLabels(map[string]string{registry.LabelControllerUID: string(parent.GetUID())})
	want := func(replicas int64) map[string]any {
		return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "example-foo"},
			"spec": map[string]any{"replicas": replicas}}
	}
	for _, tc := range []struct {
		name   string
		hook   string
		reply  map[string]any
		live   liveObjects
		action string
	}{
		{"create", hooks.Sync, map[string]any{"status": map[string]any{"availableReplicas": 0}, "children": []any{want(2)}}, nil, "create"},
		{"update", hooks.Sync, map[string]any{"children": []any{want(3)},
			"events": []any{map[string]any{"type": "Normal", "reason": "Scaled", "message": "to 3"}}}, liveObjects{deployment}, "update"},
		{"delete", hooks.Sync, map[string]any{"children": []any{}, "resyncAfterSeconds": 5}, liveObjects{deployment}, "delete"},
		{"finalize", hooks.Finalize, map[string]any{"children": []any{}, "finalized": true}, liveObjects{deployment}, "delete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply, _ := json.Marshal(tc.reply)
			checked, err := applier.Check(ctl, parent, tc.hook, reply, 10, tc.live)
			if err != nil {
				t.Fatal(err)
			}
			if steps := checked.Plan.Children; len(steps) != 1 || steps[0].Action != tc.action {
				t.Fatalf("planned %+v, want the Deployment's %s", steps, tc.action)
			}
			data := eventData(t, checked.Plan)
			if err := Validate(bus.PlanType, data); err != nil {
				t.Errorf("%v\ndata: %s", err, data)
			}
		})
	}
	rejected := &bus.Plan{Hook: hooks.Sync, RequestID: "r", Generation: 2, ResourceVersion: "48213", Children: []bus.Step{},
		Rejected: &bus.Rejected{Reason: "InvalidHookReply", Message: "sync hook reply rejected: children[0]: kind not declared in childResources"}}
	if data := eventData(t, rejected); Validate(bus.PlanType, data) != nil {
		t.Errorf("a rejected reply's plan: %v\ndata: %s", Validate(bus.PlanType, data), data)
	}
}
