package main

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/examples/fanout"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// The payloads the phases set.
const (
	createPayload = "payload written by the create phase"
	updatePayload = "payload written by the update phase"
	pacedPayload  = "payload written by the paced phase"
)

// parentName is the name of the i-th parent.
func parentName(i int) string { return fmt.Sprintf("fanout-%05d", i) }

func parentNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = parentName(i)
	}
	return names
}

// newFanout is a Fanout with m children carrying payload.
func newFanout(ns, name string, m int, payload string, labels map[string]string) *unstructured.Unstructured {
	f := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fanout.GVR.GroupVersion().String(),
		"kind":       "Fanout",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       map[string]any{"replicas": int64(m), "payload": payload},
	}}
	f.SetLabels(labels)
	return f
}

// mergePatch is a JSON merge patch setting path (outermost first) to value.
func mergePatch(value any, path ...string) []byte {
	for i := len(path) - 1; i >= 0; i-- {
		value = map[string]any{path[i]: value}
	}
	b, _ := json.Marshal(value)
	return b
}

// controllerObject is examples/fanout/controller.yaml under another name,
// taking only the parents sel selects when sel is set.
func (e *env) controllerObject(name string, sel *metav1.LabelSelector) (*unstructured.Unstructured, error) {
	var uc v1alpha1.UniversalController
	if err := yaml.UnmarshalStrict(fanout.ControllerManifest, &uc); err != nil {
		return nil, err
	}
	uc.Name = name
	uc.Spec.ParentResource.LabelSelector = sel
	if e.cfg.ignoreStatus {
		uc.Spec.ParentResource.IgnoreStatusChanges = &e.cfg.ignoreStatus
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&uc)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// registerControllers creates UniversalControllers.
func (e *env) registerControllers(ctx context.Context, ucs ...*unstructured.Unstructured) error {
	for _, uc := range ucs {
		if _, err := e.api.dyn.Resource(v1alpha1.Resource).Create(ctx, uc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("register controller %s: %w", uc.GetName(), err)
		}
	}
	return nil
}

// unregisterControllers deletes UniversalControllers.
func (e *env) unregisterControllers(ctx context.Context, names ...string) error {
	for _, name := range names {
		if err := e.api.dyn.Resource(v1alpha1.Resource).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("unregister controller %s: %w", name, err)
		}
	}
	return nil
}
