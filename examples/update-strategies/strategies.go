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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/sdk/go/hook"
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

// StrategyDemo is the parent, as far as the hook reads it.
type StrategyDemo struct {
	Spec struct {
		Message string `json:"message"`
	} `json:"spec"`
}

// Sync computes a StrategyDemo's children and status.
func Sync(_ context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
	name := req.Parent.GetName()
	demo, err := hook.Decode[StrategyDemo](req.Parent)
	if err != nil {
		return nil, err
	}
	messages, err := observed(req, name)
	if err != nil {
		return nil, err
	}
	message := demo.Spec.Message
	return &hook.SyncResponse{
		Status: map[string]any{"messages": messages},
		Children: []any{
			hook.Object{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": OnDeleteName(name)},
				"data":     map[string]any{"message": message},
			},
			hook.Object{
				"apiVersion": "v1", "kind": "Secret",
				"metadata": map[string]any{"name": RecreateName(name)},
				"data":     map[string]any{"message": base64.StdEncoding.EncodeToString([]byte(message))},
			},
			hook.Object{
				"apiVersion": "v1", "kind": "Service",
				"metadata": map[string]any{
					"name":        InPlaceName(name),
					"annotations": map[string]any{AnnotationMessage: message},
				},
				"spec": map[string]any{
					"selector": map[string]any{"app": name},
					"ports":    []any{map[string]any{"name": "http", "port": int64(80)}},
				},
			},
		},
	}, nil
}

// observed is the message each child carries, by update strategy.
func observed(req *hook.SyncRequest, name string) (map[string]any, error) {
	out := map[string]any{}
	if obj := req.Children["ConfigMap.v1"][OnDeleteName(name)]; obj != nil {
		cm, err := hook.Decode[corev1.ConfigMap](obj)
		if err != nil {
			return nil, err
		}
		out["onDelete"] = cm.Data["message"]
	}
	if obj := req.Children["Secret.v1"][RecreateName(name)]; obj != nil {
		secret, err := hook.Decode[corev1.Secret](obj)
		if err != nil {
			return nil, err
		}
		out["recreate"] = string(secret.Data["message"])
	}
	if obj := req.Children["Service.v1"][InPlaceName(name)]; obj != nil {
		svc, err := hook.Decode[corev1.Service](obj)
		if err != nil {
			return nil, err
		}
		out["inPlace"] = svc.Annotations[AnnotationMessage]
	}
	return out, nil
}
