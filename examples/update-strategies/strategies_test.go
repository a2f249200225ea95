package updatestrategies

import (
	"encoding/base64"
	"testing"

	"universalcontroller.dev/uc/examples/internal/exampletest"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

func TestSync(t *testing.T) {
	parent := hook.Object{
		"apiVersion": "examples.universalcontroller.dev/v1alpha1", "kind": "StrategyDemo",
		"metadata": map[string]any{"name": "d", "namespace": "ns"},
		"spec":     map[string]any{"message": "new"},
	}
	oldSecret := hook.Object{"data": map[string]any{"message": base64.StdEncoding.EncodeToString([]byte("old"))}}
	req := &hook.SyncRequest{Parent: parent, Children: hook.GroupedObjects{
		"ConfigMap.v1": {"d-ondelete": {"data": map[string]any{"message": "old"}}},
		"Secret.v1":    {"d-recreate": oldSecret},
		"Service.v1":   {},
	}}
	resp, err := Sync(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"onDelete": "old", "recreate": "old"}
	got := resp.Status["messages"].(map[string]any)
	if len(got) != len(want) || got["onDelete"] != "old" || got["recreate"] != "old" {
		t.Errorf("status.messages = %v, want %v", got, want)
	}
	kinds := map[string]string{}
	for _, c := range resp.Children {
		kinds[c.(hook.Object).GetKind()] = c.(hook.Object).GetName()
	}
	if kinds["ConfigMap"] != "d-ondelete" || kinds["Secret"] != "d-recreate" || kinds["Service"] != "d-inplace" {
		t.Errorf("children = %v", kinds)
	}
}

func TestManifests(t *testing.T) {
	crd, uc := exampletest.Manifests(t, CRD, ControllerManifest)
	exampletest.DefinesGVR(t, crd, GVR)
	methods := exampletest.UpdateMethods(uc)
	if uc.Name != Controller || methods["configmaps"] != v1alpha1.ChildUpdateOnDelete ||
		methods["secrets"] != v1alpha1.ChildUpdateRecreate || methods["services"] != v1alpha1.ChildUpdateInPlace {
		t.Errorf("controller.yaml registers %s with %v", uc.Name, methods)
	}
}
