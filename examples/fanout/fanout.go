// Package fanout is a synthetic controller for benchmarks: a Fanout
// (spec.replicas, spec.payload) owns spec.replicas ConfigMaps named
// <fanout>-<i>, each carrying the payload, and status.children counts the
// ConfigMaps the hook observed. Its cost is all in the machinery — watching,
// the bus, applying — not in the hook, which is what a benchmark of uc wants.
package fanout

import (
	"context"
	_ "embed"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/schemas/hooks"
)

// Controller is the name of the UniversalController in controller.yaml.
const Controller = "fanout-controller"

// Names the children carry.
const (
	// ParentLabel labels every child with its Fanout's name.
	ParentLabel = "examples.universalcontroller.dev/fanout"
	// PayloadKey is the ConfigMap data key holding the payload.
	PayloadKey = "payload"
)

// GVR is the Fanout resource.
var GVR = schema.GroupVersionResource{Group: "examples.universalcontroller.dev", Version: "v1alpha1", Resource: "fanouts"}

// The manifests, for programs that install the example.
var (
	//go:embed crd.yaml
	CRD []byte
	//go:embed controller.yaml
	ControllerManifest []byte
)

// childGroup is the key of the ConfigMaps in a request's children.
var childGroup = hooks.GroupKey("ConfigMap", "v1")

// Spec is the desired state of a Fanout.
type Spec struct {
	Replicas int32  `json:"replicas"`
	Payload  string `json:"payload,omitempty"`
}

// Sync computes a Fanout's ConfigMaps and status.
func Sync(_ context.Context, req *hooks.SyncRequest) (*hooks.SyncResponse, error) {
	var spec Spec
	raw, _, _ := unstructured.NestedMap(req.Parent.Object, "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	name := req.Parent.GetName()
	children := make([]*unstructured.Unstructured, 0, spec.Replicas)
	for i := range int(spec.Replicas) {
		children = append(children, configMap(name, i, spec.Payload))
	}
	return &hooks.SyncResponse{
		Status:   map[string]any{"children": int64(len(req.Children[childGroup]))},
		Children: children,
	}, nil
}

// ChildName is the name of a Fanout's i-th ConfigMap.
func ChildName(fanout string, i int) string { return fmt.Sprintf("%s-%d", fanout, i) }

func configMap(fanout string, i int, payload string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":   ChildName(fanout, i),
			"labels": map[string]any{ParentLabel: fanout},
		},
		"data": map[string]any{PayloadKey: payload},
	}}
}
