package fanout

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"universalcontroller.dev/uc/examples/internal/exampletest"
	"universalcontroller.dev/uc/sdk/go/hook"
)

func TestSync(t *testing.T) {
	parent := hook.Object{
		"apiVersion": "examples.universalcontroller.dev/v1alpha1",
		"kind":       "Fanout",
		"metadata":   map[string]any{"name": "f", "namespace": "ns"},
		"spec":       map[string]any{"replicas": 3, "payload": "p"},
	}
	observed := hook.ObjectMap{"f-0": configMap("f", 0, "old"), "f-7": configMap("f", 7, "old")}
	resp, err := Sync(t.Context(), &hook.SyncRequest{Parent: parent, Children: hook.GroupedObjects{childGroup: observed}})
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
		cm, err := hook.Decode[corev1.ConfigMap](c.(hook.Object))
		if err != nil {
			t.Fatal(err)
		}
		if cm.Name != ChildName("f", i) || cm.Data[PayloadKey] != "p" || cm.Labels[ParentLabel] != "f" {
			t.Errorf("children[%d] = %s with payload %q and labels %v", i, cm.Name, cm.Data[PayloadKey], cm.Labels)
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
