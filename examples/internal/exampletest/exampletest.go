// Package exampletest is what the examples' tests share: reading an
// example's crd.yaml and controller.yaml as the apiserver and uc would, and
// the checks most examples make of them.
package exampletest

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Manifests decodes an example's crd.yaml and controller.yaml strictly (a
// field their types do not have is an error) and fails the test unless
// both decode.
func Manifests(t testing.TB, crdYAML, controllerYAML []byte) (*apiextensionsv1.CustomResourceDefinition, *v1alpha1.UniversalController) {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crdYAML, &crd); err != nil {
		t.Fatalf("crd.yaml: %v", err)
	}
	var uc v1alpha1.UniversalController
	if err := yaml.UnmarshalStrict(controllerYAML, &uc); err != nil {
		t.Fatalf("controller.yaml: %v", err)
	}
	return &crd, &uc
}

// DefinesGVR fails the test unless the CRD defines gvr: its group, its
// plural and, as its first version, its version.
func DefinesGVR(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition, gvr schema.GroupVersionResource) {
	t.Helper()
	if crd.Spec.Group != gvr.Group || crd.Spec.Names.Plural != gvr.Resource ||
		len(crd.Spec.Versions) == 0 || crd.Spec.Versions[0].Name != gvr.Version {
		t.Errorf("crd.yaml is not %s", gvr)
	}
}

// UpdateMethods is the update method of each of the controller's child
// resources, by resource.
func UpdateMethods(uc *v1alpha1.UniversalController) map[string]v1alpha1.ChildUpdateMethod {
	methods := map[string]v1alpha1.ChildUpdateMethod{}
	for _, c := range uc.Spec.ChildResources {
		if c.UpdateStrategy != nil {
			methods[c.Resource] = c.UpdateStrategy.Method
		}
	}
	return methods
}
