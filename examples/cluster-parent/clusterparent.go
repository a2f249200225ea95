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
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/sdk/go/hook"
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

// ClusterConfig is the parent, as far as the hook reads it.
type ClusterConfig struct {
	Spec Spec `json:"spec"`
}

// Spec is the desired state of a ClusterConfig.
type Spec struct {
	Namespaces []string          `json:"namespaces"`
	Data       map[string]string `json:"data,omitempty"`
}

// Sync computes a ClusterConfig's ConfigMaps and status.
func Sync(_ context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
	cc, err := hook.Decode[ClusterConfig](req.Parent)
	if err != nil {
		return nil, err
	}
	name := req.Parent.GetName()
	data := map[string]any{}
	for k, v := range cc.Spec.Data {
		data[k] = v
	}
	var children []any
	for _, ns := range slices.Compact(slices.Sorted(slices.Values(cc.Spec.Namespaces))) {
		children = append(children, hook.Object{
			"apiVersion": "v1",
			"kind":       "ConfigMap",
			// A cluster-scoped parent's namespaced child names its namespace.
			"metadata": map[string]any{"name": name, "namespace": ns},
			"data":     data,
		})
	}
	// The observed ConfigMaps are keyed "namespace/name".
	var present []string
	for key := range req.Children[hook.GroupKey("ConfigMap", "v1")] {
		if ns, n, ok := strings.Cut(key, "/"); ok && n == name {
			present = append(present, ns)
		}
	}
	slices.Sort(present)
	namespaces := []any{}
	for _, ns := range present {
		namespaces = append(namespaces, ns)
	}
	return &hook.SyncResponse{
		Status:   map[string]any{"present": int64(len(present)), "namespaces": namespaces},
		Children: children,
	}, nil
}
