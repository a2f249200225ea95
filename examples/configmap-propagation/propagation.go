// Package propagation copies a source ConfigMap into a list of namespaces:
// Metacontroller's ConfigMapPropagation example, as a UniversalController. The
// parent is cluster-scoped; the customize hook names the source ConfigMap as
// a related object, so a change to the source re-syncs the parent and the
// copies follow.
package propagation

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/schemas/hooks"
)

// Controller is the name of the UniversalController in controller.yaml.
const Controller = "configmap-propagation"

type spec struct {
	SourceName, SourceNamespace string
	TargetNamespaces            []string
}

func specOf(parent *unstructured.Unstructured) spec {
	s := spec{}
	s.SourceName, _, _ = unstructured.NestedString(parent.Object, "spec", "sourceName")
	s.SourceNamespace, _, _ = unstructured.NestedString(parent.Object, "spec", "sourceNamespace")
	s.TargetNamespaces, _, _ = unstructured.NestedStringSlice(parent.Object, "spec", "targetNamespaces")
	return s
}

// Customize asks for the source ConfigMap.
func Customize(_ context.Context, req *hooks.CustomizeRequest) (*hooks.CustomizeResponse, error) {
	s := specOf(req.Parent)
	return &hooks.CustomizeResponse{RelatedResources: []hooks.RelatedResourceRule{{
		APIVersion: "v1", Resource: "configmaps", Namespace: s.SourceNamespace, Names: []string{s.SourceName},
	}}}, nil
}

// Sync copies the source's data into a ConfigMap of the same name in every
// target namespace.
func Sync(_ context.Context, req *hooks.SyncRequest) (*hooks.SyncResponse, error) {
	s := specOf(req.Parent)
	source := req.Related["ConfigMap.v1"][s.SourceNamespace+"/"+s.SourceName]
	if source == nil {
		return &hooks.SyncResponse{Status: map[string]any{"expected": len(s.TargetNamespaces), "actual": 0, "source": "missing"}}, nil
	}
	data, _, _ := unstructured.NestedStringMap(source.Object, "data")
	var children []*unstructured.Unstructured
	for _, ns := range s.TargetNamespaces {
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
		cm.SetNamespace(ns)
		cm.SetName(s.SourceName)
		_ = unstructured.SetNestedStringMap(cm.Object, data, "data")
		children = append(children, cm)
	}
	return &hooks.SyncResponse{
		Status:   map[string]any{"expected": len(s.TargetNamespaces), "actual": len(req.Children["ConfigMap.v1"])},
		Children: children,
	}, nil
}
