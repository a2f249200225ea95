// Package propagation copies a source ConfigMap into a list of namespaces:
// Metacontroller's ConfigMapPropagation example, as a UniversalController. The
// parent is cluster-scoped; the customize hook names the source ConfigMap as
// a related object, so a change to the source re-syncs the parent and the
// copies follow.
package propagation

import (
	"context"

	"universalcontroller.dev/uc/sdk/go/hook"
)

// Controller is the name of the UniversalController in controller.yaml.
const Controller = "configmap-propagation"

// propagation is the parent, as far as the hooks read it.
type propagation struct {
	Spec struct {
		SourceName       string   `json:"sourceName"`
		SourceNamespace  string   `json:"sourceNamespace"`
		TargetNamespaces []string `json:"targetNamespaces"`
	} `json:"spec"`
}

// Customize asks for the source ConfigMap.
func Customize(_ context.Context, req *hook.CustomizeRequest) (*hook.CustomizeResponse, error) {
	p, err := hook.Decode[propagation](req.Parent)
	if err != nil {
		return nil, err
	}
	return &hook.CustomizeResponse{RelatedResources: []hook.RelatedResourceRule{{
		APIVersion: "v1", Resource: "configmaps", Namespace: p.Spec.SourceNamespace, Names: []string{p.Spec.SourceName},
	}}}, nil
}

// Sync copies the source's data into a ConfigMap of the same name in every
// target namespace.
func Sync(_ context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
	p, err := hook.Decode[propagation](req.Parent)
	if err != nil {
		return nil, err
	}
	s := p.Spec
	source := req.Related["ConfigMap.v1"][s.SourceNamespace+"/"+s.SourceName]
	if source == nil {
		return &hook.SyncResponse{Status: map[string]any{"expected": len(s.TargetNamespaces), "actual": 0, "source": "missing"}}, nil
	}
	data, _ := source["data"].(map[string]any)
	if data == nil {
		data = map[string]any{}
	}
	var children []any
	for _, ns := range s.TargetNamespaces {
		children = append(children, hook.Object{
			"apiVersion": "v1",
			"kind":       "ConfigMap",
			"metadata":   map[string]any{"name": s.SourceName, "namespace": ns},
			"data":       data,
		})
	}
	return &hook.SyncResponse{
		Status:   map[string]any{"expected": len(s.TargetNamespaces), "actual": len(req.Children["ConfigMap.v1"])},
		Children: children,
	}, nil
}
