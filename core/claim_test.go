package core

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

func TestClaims(t *testing.T) {
	const parent types.UID = "parent-uid"
	sel := labels.SelectorFromSet(labels.Set{"app": "a"})
	object := func(controller types.UID, lbls map[string]string, deleting bool) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
		o.SetLabels(lbls)
		if controller != "" {
			yes := true
			o.SetOwnerReferences([]metav1.OwnerReference{{UID: controller, Controller: &yes, Kind: "Parent", Name: "p"}})
		}
		if deleting {
			now := metav1.Now()
			o.SetDeletionTimestamp(&now)
		}
		return o
	}
	match := map[string]string{"app": "a"}
	other := map[string]string{"app": "b"}
	tests := []struct {
		name            string
		obj             *unstructured.Unstructured
		claims, adopted bool
	}{
		{"controlled and matching", object(parent, match, false), true, false},
		{"controlled, being deleted: still the parent's", object(parent, match, true), true, false},
		{"controlled, no longer matching: released by the applier, not claimed", object(parent, other, false), false, false},
		{"controlled by another parent", object("other-uid", match, false), false, false},
		{"an orphan that matches", object("", match, false), true, true},
		{"an orphan that does not match", object("", other, false), false, false},
		{"an orphan being deleted", object("", match, true), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Claims(parent, sel, tt.obj); got != tt.claims {
				t.Errorf("Claims = %v, want %v", got, tt.claims)
			}
			if got := Adoptable(sel, tt.obj); got != tt.adopted {
				t.Errorf("Adoptable = %v, want %v", got, tt.adopted)
			}
		})
	}
}

// TestLabelsOf: a selector matches LabelsOf(obj) as it matches the labels
// GetLabels copies, labels absent, empty or null among them.
func TestLabelsOf(t *testing.T) {
	objs := map[string]map[string]any{
		"no metadata":  {},
		"no labels":    {"metadata": map[string]any{"name": "a"}},
		"labels null":  {"metadata": map[string]any{"labels": nil}},
		"a=1":          {"metadata": map[string]any{"labels": map[string]any{"a": "1"}}},
		"a=2, b empty": {"metadata": map[string]any{"labels": map[string]any{"a": "2", "b": ""}}},
		"b null":       {"metadata": map[string]any{"labels": map[string]any{"b": nil}}},
	}
	for _, s := range []string{"", "a=1", "a", "!a", "a!=1", "a in (1,2)", "a notin (2)", "b=", "b", "!b", "a,b"} {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		for name, obj := range objs {
			u := &unstructured.Unstructured{Object: obj}
			if got, want := sel.Matches(LabelsOf(u)), sel.Matches(labels.Set(u.GetLabels())); got != want {
				t.Errorf("selector %q on %s: matches %t, GetLabels's %t", s, name, got, want)
			}
		}
	}
}
