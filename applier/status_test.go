package applier

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// TestDeferStatus: the status of a reply whose apply changed a child is left
// to the next reply when the hook changed it but none of its conditions,
// written at once otherwise, and never deferred twice in a row.
func TestDeferStatus(t *testing.T) {
	live := map[string]any{"children": int64(5), "observedGeneration": int64(1),
		"conditions": []any{map[string]any{"type": "Synced", "status": "True"}}}
	for _, tt := range []struct {
		name         string
		live, status map[string]any
		childChanged bool
		deferredLast bool
		want         bool
	}{
		{"a child changed and the hook's status too", live, map[string]any{"children": 4}, true, false, true},
		{"first status of a new parent", nil, map[string]any{"children": 0}, true, false, true},
		{"no child changed", live, map[string]any{"children": 4}, false, false, false},
		{"the hook's status is unchanged", live, map[string]any{"children": 5}, true, false, false},
		{"only the hook's conditions differ", live, map[string]any{"children": 5, "conditions": []any{}}, true, false, false},
		{"a condition of the hook's is new", live, map[string]any{"children": 4,
			"conditions": []any{map[string]any{"type": "Restarting", "status": "True"}}}, true, false, false},
		{"a condition of the hook's changes", live, map[string]any{"children": 4,
			"conditions": []any{map[string]any{"type": "Synced", "status": "False"}}}, true, false, false},
		{"the hook's conditions stay", live, map[string]any{"children": 4,
			"conditions": []any{map[string]any{"type": "Synced", "status": "True"}}}, true, false, true},
		{"no status in the reply", live, nil, true, false, false},
		{"deferred the last time", live, map[string]any{"children": 4}, true, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &partition{deferred: map[types.UID]bool{}}
			parent := &unstructured.Unstructured{Object: map[string]any{}}
			parent.SetUID("uid")
			if tt.live != nil {
				parent.Object["status"] = tt.live
			}
			p.deferred["uid"] = tt.deferredLast
			if got := p.deferStatus(parent, tt.status, tt.childChanged); got != tt.want {
				t.Errorf("deferStatus = %v, want %v", got, tt.want)
			}
			if again := p.deferStatus(parent, tt.status, tt.childChanged); again && tt.want {
				t.Error("deferred twice in a row")
			}
		})
	}
}
