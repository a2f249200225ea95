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
