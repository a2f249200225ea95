// Package clusterparent is a cluster-scoped parent with namespaced children:
// a ClusterConfig (spec.namespaces, spec.data) owns one ConfigMap, named like
// it, holding spec.data, in each namespace it lists. Dropping a namespace
// from the list deletes its ConfigMap. Its hook is version v1, where the
// children of a cluster-scoped parent are keyed "namespace/name";
// status.present lists the namespaces whose ConfigMap the hook saw.
package clusterparent

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/schemas/hooks"
)

// Controller is the name of the UniversalController in controller.yaml.
const Controller = "cluster-config-controller"

// GVR is the ClusterConfig resource.
var GVR = schema.GroupVersionResource{Group: "examples.universalcontroller.dev", Version: "v1alpha1", Resource: "clusterconfigs"}

// The manifests, for programs that install the example.
var (
	//go:embed crd.yaml
	CRD []byte
	//go:embed controller.yaml
	ControllerManifest []byte
)

// Spec is the desired state of a ClusterConfig.
type Spec struct {
	Namespaces []string          `json:"namespaces"`
	Data       map[string]string `json:"data,omitempty"`
}

// Sync computes a ClusterConfig's ConfigMaps and status.
func Sync(_ context.Context, req *hooks.SyncRequest) (*hooks.SyncResponse, error) {
	var spec Spec
	raw, _, _ := unstructured.NestedMap(req.Parent.Object, "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	name := req.Parent.GetName()
	data := map[string]any{}
	for k, v := range spec.Data {
		data[k] = v
	}
	var children []*unstructured.Unstructured
	for _, ns := range slices.Compact(slices.Sorted(slices.Values(spec.Namespaces))) {
		children = append(children, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1",
			"kind":       "ConfigMap",
			// A cluster-scoped parent's namespaced child names its namespace.
			"metadata": map[string]any{"name": name, "namespace": ns},
			"data":     data,
		}})
	}
	// The observed ConfigMaps are keyed "namespace/name".
	var present []string
	for key := range req.Children[hooks.GroupKey("ConfigMap", "v1")] {
		if ns, n, ok := strings.Cut(key, "/"); ok && n == name {
			present = append(present, ns)
		}
	}
	slices.Sort(present)
	namespaces := []any{}
	for _, ns := range present {
		namespaces = append(namespaces, ns)
	}
	return &hooks.SyncResponse{
		Status:   map[string]any{"present": int64(len(present)), "namespaces": namespaces},
		Children: children,
	}, nil
}
