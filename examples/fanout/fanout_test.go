package fanout

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/examples/internal/exampletest"
	"universalcontroller.dev/uc/schemas/hooks"
)

func TestSync(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "examples.universalcontroller.dev/v1alpha1",
		"kind":       "Fanout",
		"metadata":   map[string]any{"name": "f", "namespace": "ns"},
		"spec":       map[string]any{"replicas": int64(3), "payload": "p"},
	}}
	observed := hooks.ObjectMap{"f-0": configMap("f", 0, "old"), "f-7": configMap("f", 7, "old")}
	resp, err := Sync(t.Context(), &hooks.SyncRequest{Parent: parent, Children: hooks.GroupedObjects{childGroup: observed}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Status["children"]; got != int64(2) {
		t.Errorf("status.children = %v, want the 2 observed", got)
	}
	if len(resp.Children) != 3 {
		t.Fatalf("%d children, want 3", len(resp.Children))
	}
	for i, c := range resp.Children {
		payload, _, _ := unstructured.NestedString(c.Object, "data", PayloadKey)
		if c.GetName() != ChildName("f", i) || payload != "p" || c.GetLabels()[ParentLabel] != "f" {
			t.Errorf("children[%d] = %s with payload %q and labels %v", i, c.GetName(), payload, c.GetLabels())
		}
	}
}

func TestManifests(t *testing.T) {
	crd, uc := exampletest.Manifests(t, CRD, ControllerManifest)
	exampletest.DefinesGVR(t, crd, GVR)
	if uc.Name != Controller || uc.Spec.ParentResource.Resource != GVR.Resource {
		t.Errorf("controller.yaml registers %s for %s", uc.Name, uc.Spec.ParentResource.Resource)
	}
}
