package hook

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"universalcontroller.dev/uc/schemas/hooks"
)

// TestMessagesMatchTheContract: the SDK's messages have the JSON fields of
// schemas/hooks' — the types uc itself reads and writes — field for field,
// and nested types too (objects aside: plain JSON here, unstructured
// there). A field added to the contract fails here until the SDK has it.
func TestMessagesMatchTheContract(t *testing.T) {
	for _, tc := range []struct{ sdk, contract any }{
		{SyncRequest{}, hooks.SyncRequest{}},
		{SyncResponse{}, hooks.SyncResponse{}},
		{CustomizeRequest{}, hooks.CustomizeRequest{}},
		{CustomizeResponse{}, hooks.CustomizeResponse{}},
		{DecoratorRequest{}, hooks.DecoratorRequest{}},
		{DecoratorResponse{}, hooks.DecoratorResponse{}},
	} {
		sdk, contract := reflect.TypeOf(tc.sdk), reflect.TypeOf(tc.contract)
		t.Run(sdk.Name(), func(t *testing.T) { sameFields(t, sdk.Name(), sdk, contract) })
	}
	for sdk, contract := range map[string]string{syncHook: hooks.Sync, finalizeHook: hooks.Finalize, customizeHook: hooks.Customize} {
		if sdk != contract {
			t.Errorf("hook name %q, the contract's %q", sdk, contract)
		}
	}
}

// sameFields fails unless the structs sdk and contract have the same JSON
// fields, and the fields that are structs on both sides the same in turn.
func sameFields(t *testing.T, path string, sdk, contract reflect.Type) {
	t.Helper()
	s, c := jsonFields(sdk), jsonFields(contract)
	for _, name := range slices.Sorted(maps.Keys(c)) {
		if _, ok := s[name]; !ok {
			t.Errorf("%s.%s is in the contract (%s), not in the SDK", path, name, contract)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s)) {
		ct, ok := c[name]
		if !ok {
			t.Errorf("%s.%s is in the SDK, not in the contract (%s)", path, name, contract)
			continue
		}
		if st, ct := element(s[name]), element(ct); st.Kind() == reflect.Struct && ct.Kind() == reflect.Struct {
			sameFields(t, path+"."+name, st, ct)
		}
	}
}

// jsonFields are a struct's fields by JSON name, embedded structs' inlined.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case f.Anonymous && name == "":
			for n, ft := range jsonFields(element(f.Type)) {
				fields[n] = ft
			}
		case name == "":
			fields[f.Name] = f.Type
		default:
			fields[name] = f.Type
		}
	}
	return fields
}

// element is what a field holds: the element of pointers, slices and maps.
func element(typ reflect.Type) reflect.Type {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
		typ = typ.Elem()
	}
	return typ
}

func TestObject(t *testing.T) {
	pod := Object{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{
		"name": "p", "namespace": "ns", "annotations": map[string]any{"a": "1"},
	}, "spec": map[string]any{"nodeName": "n"}}
	if pod.GetName() != "p" || pod.GetNamespace() != "ns" || pod.GetKind() != "Pod" || !reflect.DeepEqual(pod.GetAnnotations(), map[string]string{"a": "1"}) {
		t.Errorf("name %q, namespace %q, kind %q, annotations %v", pod.GetName(), pod.GetNamespace(), pod.GetKind(), pod.GetAnnotations())
	}
	var empty Object
	if empty.GetName() != "" || empty.GetKind() != "" || len(empty.GetAnnotations()) != 0 {
		t.Error("an empty object has a name, kind or annotations")
	}

	typed, err := Decode[corev1.Pod](pod)
	if err != nil || typed.Name != "p" || typed.Spec.NodeName != "n" {
		t.Fatalf("Decode: %+v, %v", typed, err)
	}
	back, err := ObjectOf(&typed)
	if err != nil || back.GetName() != "p" || back["spec"].(map[string]any)["nodeName"] != "n" {
		t.Errorf("ObjectOf: %v, %v", back, err)
	}

	bad := Object{"kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": "ns", "generation": "one"}}
	if _, err := Decode[metav1.PartialObjectMetadata](bad); err == nil || !strings.HasPrefix(err.Error(), "decode Pod ns/p: ") {
		t.Errorf("Decode of a bad object: %v, want an error naming it", err)
	}
	if _, err := ObjectOf(func() {}); err == nil {
		t.Error("ObjectOf encoded a func")
	}
}
