package core

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

func TestDifference(t *testing.T) {
	tests := []struct {
		name       string
		live, want any
		diff       string
	}{
		{"contained", map[string]any{"a": "x", "b": "y"}, map[string]any{"a": "x"}, ""},
		{"a defaulted port", map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80), "targetPort": int64(80)}}}},
			map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80), "targetPort": int64(0)}}}},
			"spec.ports[0].targetPort: desired 0, live 80"},
		{"the first path in order", map[string]any{"a": "1", "b": "2"}, map[string]any{"b": "3", "a": "0"}, `a: desired "0", live "1"`},
		{"a field the live object lacks", map[string]any{}, map[string]any{"a": map[string]any{"b": "x"}}, `a: desired {"b":"x"}, live unset`},
		{"lists of another length, whole", map[string]any{"l": []any{"a"}}, map[string]any{"l": []any{"a", "b"}}, `l: desired ["a","b"], live ["a"]`},
		{"the whole object", "a", "b", `the object: desired "b", live "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Difference(tt.live, tt.want); got != tt.diff {
				t.Errorf("Difference = %q, want %q", got, tt.diff)
			}
		})
	}
}

// TestRecreateDrift: a re-creation says what drifted only when the desired
// state is the one the child was made from; InPlace and a changed desired
// state carry none.
func TestRecreateDrift(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("parent-uid")
	desired := func(method v1alpha1.ChildUpdateMethod, v string) *unstructured.Unstructured {
		ctl := testController(method)
		o, err := desiredObject(ctl, parent, &ctl.Children[0], object("ConfigMap", "", "a", map[string]any{"k": v}, ""), ownerRef(ctl, parent))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	tests := []struct {
		name       string
		method     v1alpha1.ChildUpdateMethod
		live, want string // the value of data.k the live child was made from, the desired one
		edit       func(*unstructured.Unstructured)
		verb       Verb
		drift      string
	}{
		{"drift of the same desired state", v1alpha1.ChildUpdateRecreate, "1", "1",
			func(o *unstructured.Unstructured) { o.Object["data"] = map[string]any{"k": "edited"} }, VerbDelete, `data.k: desired "1", live "edited"`},
		{"rolling recreate too", v1alpha1.ChildUpdateRollingRecreate, "1", "1",
			func(o *unstructured.Unstructured) { o.Object["data"] = map[string]any{"k": "edited"} }, VerbDelete, `data.k: desired "1", live "edited"`},
		{"a new desired state", v1alpha1.ChildUpdateRecreate, "1", "2", nil, VerbDelete, ""},
		{"a child uc never applied", v1alpha1.ChildUpdateRecreate, "1", "2",
			func(o *unstructured.Unstructured) { o.SetAnnotations(nil) }, VerbDelete, ""},
		{"in place", v1alpha1.ChildUpdateInPlace, "1", "1",
			func(o *unstructured.Unstructured) { o.Object["data"] = map[string]any{"k": "edited"} }, VerbApply, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctl := testController(tt.method)
			cur := desired(tt.method, tt.live)
			cur.SetUID("uid-a")
			if tt.edit != nil {
				tt.edit(cur)
			}
			w, ok := update(&ctl.Children[0], cur, desired(tt.method, tt.want))
			if !ok || w.Verb != tt.verb || w.Drift != tt.drift {
				t.Errorf("update = %v %s drift %q, want %s drift %q", ok, w.Verb, w.Drift, tt.verb, tt.drift)
			}
		})
	}
}
