// Package coretest holds the controller the tests of the roles decide
// with: one of ConfigMap children, whose objects internal/objtest makes.
package coretest

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/objtest"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Controller is the controller "test" of namespaced example.com/v1
// Parents, with a generated selector and ConfigMap children updated with
// method.
func Controller(method v1alpha1.ChildUpdateMethod) *core.Controller {
	yes := true
	return &core.Controller{
		Name: "test",
		Spec: v1alpha1.UniversalControllerSpec{GenerateSelector: &yes},
		Parent: core.Resource{
			GVR:        schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "parents"},
			GVK:        schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Parent"},
			Namespaced: true,
		},
		Children: []core.Child{{
			Resource: core.Resource{
				GVR:        schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
				GVK:        schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
				Namespaced: true,
			},
			Method: method,
		}},
	}
}

// Desired is obj as the applier writes it for the Parent of ctl: the
// object of the create that core.Plan plans for a reply of obj alone.
func Desired(ctl *core.Controller, parent, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	writes, err := core.Plan(ctl, parent, &hooks.SyncResponse{Children: []*unstructured.Unstructured{obj}}, objtest.Live{})
	if err != nil {
		return nil, err
	}
	return writes[0].Object, nil
}
