package exampletest

import (
	"fmt"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// recordingT records the failures reported to it instead of failing.
type recordingT struct {
	testing.TB
	failures []string
}

func (r *recordingT) Helper() {}
func (r *recordingT) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func TestDefinesGVR(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "g.example", Version: "v1", Resource: "things"}
	crd := func(group, plural string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
		c := &apiextensionsv1.CustomResourceDefinition{}
		c.Spec.Group, c.Spec.Names.Plural = group, plural
		for _, v := range versions {
			c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v})
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		crd   *apiextensionsv1.CustomResourceDefinition
		fails bool
	}{
		{"the resource", crd("g.example", "things", "v1", "v2"), false},
		{"another group", crd("h.example", "things", "v1"), true},
		{"another plural", crd("g.example", "others", "v1"), true},
		{"the version not first", crd("g.example", "things", "v2", "v1"), true},
		{"no version", crd("g.example", "things"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingT{TB: t}
			DefinesGVR(rec, tc.crd, gvr)
			if failed := len(rec.failures) > 0; failed != tc.fails {
				t.Errorf("failed %v (%v), want %v", failed, rec.failures, tc.fails)
			}
		})
	}
}

func TestUpdateMethods(t *testing.T) {
	uc := &v1alpha1.UniversalController{Spec: v1alpha1.UniversalControllerSpec{ChildResources: []v1alpha1.ChildResource{
		{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "pods"}, UpdateStrategy: &v1alpha1.ChildUpdateStrategy{Method: v1alpha1.ChildUpdateRecreate}},
		{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "services"}},
	}}}
	got := UpdateMethods(uc)
	if len(got) != 1 || got["pods"] != v1alpha1.ChildUpdateRecreate {
		t.Errorf("UpdateMethods = %v, want pods Recreate and services without a strategy", got)
	}
}
