package crds

import (
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestEveryFieldDescribed: kubectl explain has a description for every
// field of every CRD. A field without one needs a comment on its Go field
// (or on its type) in schemas/v1alpha1. The top-level metadata is left out:
// the apiserver explains it as ObjectMeta.
func TestEveryFieldDescribed(t *testing.T) {
	crds, err := All()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			root := *v.Schema.OpenAPIV3Schema
			if root.Description == "" {
				t.Errorf("%s %s has no description", crd.Name, v.Name)
			}
			delete(root.Properties, "metadata")
			for _, path := range undescribed(crd.Spec.Names.Kind, root) {
				t.Errorf("%s %s: %s has no description", crd.Name, v.Name, path)
			}
		}
	}
}

// undescribed lists the fields under s that have no description, by path
// (items of a list as path[], values of a map as path{}).
func undescribed(path string, s apiextensionsv1.JSONSchemaProps) []string {
	var paths []string
	for name, p := range s.Properties {
		if p.Description == "" {
			paths = append(paths, path+"."+name)
		}
		paths = append(paths, undescribed(path+"."+name, p)...)
	}
	if s.Items != nil && s.Items.Schema != nil {
		paths = append(paths, undescribed(path+"[]", *s.Items.Schema)...)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		paths = append(paths, undescribed(path+"{}", *s.AdditionalProperties.Schema)...)
	}
	return paths
}

// TestCategoryAndColumns: every CRD is in the category uc-all (kubectl get
// uc-all lists them all) and keeps its printer columns. The category is not
// uc: kubectl expands a category before a short name, so kubectl get uc NAME
// (describe, delete…) would fail with "you must specify only one resource".
func TestCategoryAndColumns(t *testing.T) {
	columns := map[string][]string{
		"universalcontrollers.universalcontroller.dev": {"Parent", "Ready", "Failing", "Age"},
		"universaldecorators.universalcontroller.dev":  {"Resources", "Ready", "Age"},
		"controllerrevisions.universalcontroller.dev":  {"Revision", "Age"},
	}
	crds, err := All()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		want, ok := columns[crd.Name]
		if !ok {
			t.Errorf("%s: no printer columns expected; add them here", crd.Name)
		}
		if !slices.Equal(crd.Spec.Names.Categories, []string{"uc-all"}) {
			t.Errorf("%s: categories %v, want [uc-all]", crd.Name, crd.Spec.Names.Categories)
		}
		for _, v := range crd.Spec.Versions {
			var got []string
			for _, c := range v.AdditionalPrinterColumns {
				got = append(got, c.Name)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s %s: printer columns %v, want %v", crd.Name, v.Name, got, want)
			}
		}
	}
}
