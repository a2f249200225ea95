package clusterparent

import (
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"universalcontroller.dev/uc/examples/internal/exampletest"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

func TestSync(t *testing.T) {
	parent := hook.Object{
		"apiVersion": "examples.universalcontroller.dev/v1alpha1", "kind": "ClusterConfig",
		"metadata": map[string]any{"name": "c"},
		"spec":     map[string]any{"namespaces": []any{"b", "a", "b"}, "data": map[string]any{"k": "v"}},
	}
	resp, err := Sync(t.Context(), &hook.SyncRequest{Parent: parent, Children: hook.GroupedObjects{
		"ConfigMap.v1": {"a/c": {}, "z/c": {}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range resp.Children {
		cm := c.(hook.Object)
		got = append(got, cm.GetNamespace()+"/"+cm.GetName())
	}
	if !slices.Equal(got, []string{"a/c", "b/c"}) {
		t.Errorf("children %v, want one ConfigMap in a and b", got)
	}
	if resp.Status["present"] != int64(2) {
		t.Errorf("status = %v, want the two observed", resp.Status)
	}
}

func TestManifests(t *testing.T) {
	crd, uc := exampletest.Manifests(t, CRD, ControllerManifest)
	if crd.Spec.Scope != apiextensionsv1.ClusterScoped || crd.Spec.Names.Plural != GVR.Resource {
		t.Errorf("crd.yaml is not the cluster-scoped %s", GVR)
	}
	if uc.Name != Controller || uc.Spec.ParentResource.Resource != GVR.Resource || uc.Spec.Hooks.Sync.Version != v1alpha1.HookV1 {
		t.Errorf("controller.yaml registers %s for %s (hook %s)", uc.Name, uc.Spec.ParentResource.Resource, uc.Spec.Hooks.Sync.Version)
	}
}
