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

	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/sdk/go/hook"
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
var childGroup = hook.GroupKey("ConfigMap", "v1")

// Fanout is the parent, as far as the hook reads it.
type Fanout struct {
	Spec Spec `json:"spec"`
}

// Spec is the desired state of a Fanout.
type Spec struct {
	Replicas int32  `json:"replicas"`
	Payload  string `json:"payload,omitempty"`
}

// Sync computes a Fanout's ConfigMaps and status.
func Sync(_ context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
	f, err := hook.Decode[Fanout](req.Parent)
	if err != nil {
		return nil, err
	}
	children := make([]any, 0, f.Spec.Replicas)
	for i := range int(f.Spec.Replicas) {
		children = append(children, configMap(req.Parent.GetName(), i, f.Spec.Payload))
	}
	return &hook.SyncResponse{
		Status:   map[string]any{"children": int64(len(req.Children[childGroup]))},
		Children: children,
	}, nil
}

// ChildName is the name of a Fanout's i-th ConfigMap.
func ChildName(fanout string, i int) string { return fmt.Sprintf("%s-%d", fanout, i) }

func configMap(fanout string, i int, payload string) hook.Object {
	return hook.Object{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":   ChildName(fanout, i),
			"labels": map[string]any{ParentLabel: fanout},
		},
		"data": map[string]any{PayloadKey: payload},
	}
}
