// Package updatestrategies demonstrates the non-rolling child update
// strategies. A StrategyDemo (spec.message) owns three children that carry
// the message, one per child resource because an update strategy belongs to
// a child resource:
//
//   - the ConfigMap <name>-ondelete, OnDelete: never updated; deleted by
//     hand, it comes back with the new message;
//   - the Secret <name>-recreate, Recreate: deleted and created again when
//     the message changes (it gets a new UID);
//   - the Service <name>-inplace, InPlace: updated with server-side apply
//     (it keeps its UID).
//
// status.messages reports the message each child carries now.
package updatestrategies

import (
	"context"
	_ "embed"
	"encoding/base64"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/schemas/hooks"
)

// Controller is the name of the UniversalController in controller.yaml.
const Controller = "strategy-demo-controller"

// AnnotationMessage carries the message on the Service.
const AnnotationMessage = "examples.universalcontroller.dev/message"

// GVR is the StrategyDemo resource.
var GVR = schema.GroupVersionResource{Group: "examples.universalcontroller.dev", Version: "v1alpha1", Resource: "strategydemos"}

// The manifests, for programs that install the example.
var (
	//go:embed crd.yaml
	CRD []byte
	//go:embed controller.yaml
	ControllerManifest []byte
)

// The children's names, by update strategy.
func OnDeleteName(parent string) string { return parent + "-ondelete" }
func RecreateName(parent string) string { return parent + "-recreate" }
func InPlaceName(parent string) string  { return parent + "-inplace" }

// Sync computes a StrategyDemo's children and status.
func Sync(_ context.Context, req *hooks.SyncRequest) (*hooks.SyncResponse, error) {
	name := req.Parent.GetName()
	message, _, err := unstructured.NestedString(req.Parent.Object, "spec", "message")
	if err != nil {
		return nil, fmt.Errorf("spec.message: %w", err)
	}
	return &hooks.SyncResponse{
		Status: map[string]any{"messages": observed(req, name)},
		Children: []*unstructured.Unstructured{
			{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": OnDeleteName(name)},
				"data":     map[string]any{"message": message},
			}},
			{Object: map[string]any{
				"apiVersion": "v1", "kind": "Secret",
				"metadata": map[string]any{"name": RecreateName(name)},
				"data":     map[string]any{"message": base64.StdEncoding.EncodeToString([]byte(message))},
			}},
			{Object: map[string]any{
				"apiVersion": "v1", "kind": "Service",
				"metadata": map[string]any{
					"name":        InPlaceName(name),
					"annotations": map[string]any{AnnotationMessage: message},
				},
				"spec": map[string]any{
					"selector": map[string]any{"app": name},
					"ports":    []any{map[string]any{"name": "http", "port": int64(80)}},
				},
			}},
		},
	}, nil
}

// observed is the message each child carries, by update strategy.
func observed(req *hooks.SyncRequest, name string) map[string]any {
	out := map[string]any{}
	if cm := req.Children["ConfigMap.v1"][OnDeleteName(name)]; cm != nil {
		out["onDelete"], _, _ = unstructured.NestedString(cm.Object, "data", "message")
	}
	if s := req.Children["Secret.v1"][RecreateName(name)]; s != nil {
		enc, _, _ := unstructured.NestedString(s.Object, "data", "message")
		dec, _ := base64.StdEncoding.DecodeString(enc)
		out["recreate"] = string(dec)
	}
	if svc := req.Children["Service.v1"][InPlaceName(name)]; svc != nil {
		out["inPlace"] = svc.GetAnnotations()[AnnotationMessage]
	}
	return out
}
