package registry

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// TestInformerSetIsShared: one informer per resource type whatever the
// number of users, stopped when its last user goes.
func TestInformerSetIsShared(t *testing.T) {
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	foos := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "foos"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		cms: "ConfigMapList", foos: "FooList",
	})
	s := newInformerSet(dyn)
	running := func() map[schema.GroupVersionResource]int {
		out := map[schema.GroupVersionResource]int{}
		for gvr, e := range s.byGVR {
			if e.stop != nil {
				out[gvr] = len(e.users)
			}
		}
		return out
	}
	first := s.get(cms).Informer()
	for _, user := range []string{"a", "b", "c", "d", "e"} {
		s.use(user, foos, cms)
	}
	if got := running(); len(got) != 2 || got[cms] != 5 {
		t.Fatalf("5 users of 2 kinds run %v, want 2 informers with 5 users each", got)
	}
	if s.get(cms).Informer() != first {
		t.Fatal("a second informer was made for one kind")
	}
	s.only("a", cms) // a stops using foos
	for _, user := range []string{"b", "c", "d", "e"} {
		s.only(user)
	}
	if got := running(); len(got) != 1 || got[cms] != 1 {
		t.Fatalf("after the others left, %v run, want configmaps for a", got)
	}
	s.only("a")
	if got := running(); len(got) != 0 {
		t.Fatalf("with no users, %v still run", got)
	}
}

// TestInformersDropManagedFields: objects enter the shared caches without
// their managedFields.
func TestInformersDropManagedFields(t *testing.T) {
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": "c", "namespace": "ns",
			"managedFields": []any{map[string]any{"manager": "uc/x", "operation": "Apply", "fieldsType": "FieldsV1"}},
		},
		"data": map[string]any{"k": "v"},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{cms: "ConfigMapList"}, cm)
	s := newInformerSet(dyn)
	s.use("a", cms)
	defer s.only("a")
	if err := s.waitSynced(t.Context(), cms); err != nil {
		t.Fatal(err)
	}
	got, err := s.get(cms).Lister().ByNamespace("ns").Get("c")
	if err != nil {
		t.Fatal(err)
	}
	u := got.(*unstructured.Unstructured)
	if mf := u.GetManagedFields(); mf != nil {
		t.Errorf("cached object has managedFields %v", mf)
	}
	if v, _, _ := unstructured.NestedString(u.Object, "data", "k"); v != "v" {
		t.Errorf("cached object lost its data: %v", u.Object)
	}
}
