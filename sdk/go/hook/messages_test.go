package hook

import (
	"reflect"
	"strings"
	"testing"
)

// pod is the part of a Pod TestObject decodes: a typed object of one's own,
// as a hook has (the SDK's module has no Kubernetes API types).
type pod struct {
	Metadata struct {
		Name       string `json:"name"`
		Generation int64  `json:"generation,omitempty"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"`
	} `json:"spec"`
}

func TestObject(t *testing.T) {
	obj := Object{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{
		"name": "p", "namespace": "ns", "annotations": map[string]any{"a": "1"},
	}, "spec": map[string]any{"nodeName": "n"}}
	if obj.GetName() != "p" || obj.GetNamespace() != "ns" || obj.GetKind() != "Pod" || !reflect.DeepEqual(obj.GetAnnotations(), map[string]string{"a": "1"}) {
		t.Errorf("name %q, namespace %q, kind %q, annotations %v", obj.GetName(), obj.GetNamespace(), obj.GetKind(), obj.GetAnnotations())
	}
	var empty Object
	if empty.GetName() != "" || empty.GetKind() != "" || len(empty.GetAnnotations()) != 0 {
		t.Error("an empty object has a name, kind or annotations")
	}

	typed, err := Decode[pod](obj)
	if err != nil || typed.Metadata.Name != "p" || typed.Spec.NodeName != "n" {
		t.Fatalf("Decode: %+v, %v", typed, err)
	}
	back, err := ObjectOf(&typed)
	if err != nil || back.GetName() != "p" || back["spec"].(map[string]any)["nodeName"] != "n" {
		t.Errorf("ObjectOf: %v, %v", back, err)
	}

	bad := Object{"kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": "ns", "generation": "one"}}
	if _, err := Decode[pod](bad); err == nil || !strings.HasPrefix(err.Error(), "decode Pod ns/p: ") {
		t.Errorf("Decode of a bad object: %v, want an error naming it", err)
	}
	if _, err := ObjectOf(func() {}); err == nil {
		t.Error("ObjectOf encoded a func")
	}
}
