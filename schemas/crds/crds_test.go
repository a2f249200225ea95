package crds

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

func TestAll(t *testing.T) {
	crds, err := All()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range crds {
		byName[crd.Name] = crd
	}

	const name = "universalcontrollers.universalcontroller.dev"
	crd := byName[name]
	if crd == nil {
		t.Fatalf("no CRD named %s among %d", name, len(crds))
	}
	if got := v1alpha1.Resource.GroupResource().String(); got != name {
		t.Errorf("v1alpha1.Resource is %s, CRD is %s", got, name)
	}
	if crd.Spec.Group != v1alpha1.Group {
		t.Errorf("group = %q, want %q", crd.Spec.Group, v1alpha1.Group)
	}
	if crd.Spec.Scope != apiextensionsv1.ClusterScoped {
		t.Errorf("scope = %q, want %q", crd.Spec.Scope, apiextensionsv1.ClusterScoped)
	}
	if crd.Spec.Names.Kind != "UniversalController" || crd.Spec.Names.Plural != v1alpha1.Resource.Resource {
		t.Errorf("names = %+v", crd.Spec.Names)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%d versions, want 1", len(crd.Spec.Versions))
	}
	v := crd.Spec.Versions[0]
	if v.Name != v1alpha1.Version || !v.Served || !v.Storage {
		t.Errorf("version %s served=%t storage=%t, want %s served and stored", v.Name, v.Served, v.Storage, v1alpha1.Version)
	}
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Error("no status subresource")
	}
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		t.Fatal("no schema")
	}

	// Spot checks of fields whose types come from other modules.
	root := *v.Schema.OpenAPIV3Schema
	dest := prop(t, root, "spec", "hooks", "sync", "destination")
	if dest.Type != "object" {
		t.Errorf("destination type = %q, want object", dest.Type)
	}
	for _, f := range []string{"ref", "uri", "CACerts", "audience"} {
		if _, ok := dest.Properties[f]; !ok {
			t.Errorf("destination has no %s", f)
		}
	}
	if uri := prop(t, dest, "uri"); uri.Type != "string" || len(uri.Properties) != 0 {
		t.Errorf("destination.uri = type %q with %d properties, want a string", uri.Type, len(uri.Properties))
	}
	sel := prop(t, root, "spec", "parentResource", "labelSelector")
	if _, ok := sel.Properties["matchLabels"]; !ok {
		t.Error("labelSelector has no matchLabels")
	}
	if _, ok := sel.Properties["matchExpressions"]; !ok {
		t.Error("labelSelector has no matchExpressions")
	}
	conds := prop(t, root, "status", "conditions")
	if conds.XListType == nil || *conds.XListType != "map" || len(conds.XListMapKeys) != 1 || conds.XListMapKeys[0] != "type" {
		t.Errorf("status.conditions: x-kubernetes-list-type %v, map keys %v; want map keyed by type", conds.XListType, conds.XListMapKeys)
	}
}

func TestAllReturnsFreshObjects(t *testing.T) {
	a, err := All()
	if err != nil {
		t.Fatal(err)
	}
	a[0].Name = "changed"
	b, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if b[0].Name == "changed" {
		t.Error("All returned a shared object")
	}
}

// prop walks the properties of s along path.
func prop(t *testing.T, s apiextensionsv1.JSONSchemaProps, path ...string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for i, p := range path {
		next, ok := s.Properties[p]
		if !ok {
			t.Fatalf("schema has no %v", path[:i+1])
		}
		s = next
	}
	return s
}
