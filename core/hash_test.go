package core

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestAppliedHashIsStable: the applied hash of an object does not change
// from one uc to the next. A child whose hash changes is applied again,
// so an upgrade that changed how the hash is made would rewrite every
// child of every parent at once. The hashes below were made by uc 0.1.0.
func TestAppliedHashIsStable(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  map[string]any
		want string
	}{
		{"a ConfigMap", map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "a", "namespace": "ns", "labels": map[string]any{"app": "x"}},
			"data":     map[string]any{"k": "v", "html": "<b>&</b>", "line": "a\u2028b"},
		}, "06fe1b7b6357e6ed7d2e9eb2"},
		{"with annotations, the old hash among them", map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "d", "annotations": map[string]any{v1alpha1.AnnotationAppliedHash: "stale", "note": "é"}},
			"spec":     map[string]any{"replicas": int64(3), "ratio": 0.25, "paused": false, "list": []any{"b", "a", nil, map[string]any{}}},
		}, "7099b2f19ad8f7c4d8ab0292"},
		{"annotations null", map[string]any{
			"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s", "annotations": nil},
		}, "0b8eaa0f4c7a6613dc81ec77"},
		{"no metadata", map[string]any{"apiVersion": "v1", "kind": "Secret"}, "d20ba5c7797c48060441cad5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: tc.obj}
			want := hashAsReleased(t, obj)
			if err := setAppliedHash(obj); err != nil {
				t.Fatal(err)
			}
			got := obj.GetAnnotations()[v1alpha1.AnnotationAppliedHash]
			if got != tc.want || got != want {
				t.Errorf("applied hash %s, want %s (as released: %s)", got, tc.want, want)
			}
		})
	}
}

// hashAsReleased is the applied hash as uc 0.1.0 made it.
func hashAsReleased(t *testing.T, obj *unstructured.Unstructured) string {
	t.Helper()
	c := obj.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "annotations", v1alpha1.AnnotationAppliedHash)
	b, err := json.Marshal(c.Object)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}
