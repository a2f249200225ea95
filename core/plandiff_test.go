package core

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// wanting is an outcome wanting ConfigMaps, each named with its data's
// value v, as uc would write them.
func wanting(status map[string]any, cms ...string) Outcome {
	o := Outcome{Children: map[string]*unstructured.Unstructured{}, Status: status}
	for _, nv := range cms {
		name, v, _ := strings.Cut(nv, "=")
		c := object("ConfigMap", "ns", name, map[string]any{"v": v}, "")
		c.SetUID("") // a desired object has none
		if err := setAppliedHash(c); err != nil {
			panic(err)
		}
		o.Children[ChildKey(c)] = c
	}
	return o
}

// TestDiffOutcomes: children the shadow adds, removes or changes, status
// fields and conditions it sets otherwise, and rejections, are what a
// difference holds; the same outcomes make none, and the same difference
// has the same hash whatever the request.
func TestDiffOutcomes(t *testing.T) {
	invalid := &bus.Rejected{Reason: "InvalidHookReply", Message: "sync hook reply rejected: children[0]: kind not declared"}
	ready := func(status string) []hooks.Condition {
		return []hooks.Condition{{Type: "Ready", Status: status, Reason: "Checked"}}
	}
	for _, tc := range []struct {
		name         string
		sync, shadow Outcome
		want         string // formatted as show does
	}{
		{"the same", wanting(map[string]any{"n": 1}, "a=1", "b=2"), wanting(map[string]any{"n": int64(1)}, "a=1", "b=2"), ""},
		{"a child added", wanting(nil, "a=1"), wanting(nil, "a=1", "b=2"), "added [ConfigMap.v1 ns/b]"},
		{"a child removed", wanting(nil, "a=1", "b=2"), wanting(nil, "b=2"), "removed [ConfigMap.v1 ns/a]"},
		{"a child changed", wanting(nil, "a=1"), wanting(nil, "a=2"), "changed [ConfigMap.v1 ns/a]"},
		{"status fields", wanting(map[string]any{"n": 1, "deep": map[string]any{"x": "a", "y": "b"}, "gone": true}),
			wanting(map[string]any{"n": 2, "deep": map[string]any{"x": "a", "y": "c"}}), "status [status.deep.y status.gone status.n]"},
		{"a status set against one left", wanting(nil), wanting(map[string]any{}), "status [status]"},
		{"conditions", Outcome{Conditions: ready("True")}, Outcome{Conditions: ready("False")}, "status [status.conditions[Ready]]"},
		{"a condition only one sets", Outcome{}, Outcome{Conditions: ready("True")}, "status [status.conditions[Ready]]"},
		{"the shadow's reply rejected", wanting(nil, "a=1"), Outcome{Rejected: invalid}, "shadow rejected InvalidHookReply"},
		{"the sync hook's reply rejected", Outcome{Rejected: invalid}, wanting(nil, "a=1"), "sync rejected InvalidHookReply"},
		{"both rejected alike", Outcome{Rejected: invalid}, Outcome{Rejected: invalid}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DiffOutcomes("req-1", tc.sync, tc.shadow)
			if got := show(d); got != tc.want {
				t.Errorf("difference %q, want %q", got, tc.want)
			}
			if d.Empty() != (d.Hash == "") || d.Request != "req-1" {
				t.Errorf("hash %q of a difference empty: %t; request %q", d.Hash, d.Empty(), d.Request)
			}
			if again := DiffOutcomes("req-2", tc.sync, tc.shadow); again.Hash != d.Hash {
				t.Errorf("the same difference for another request has another hash: %s, %s", again.Hash, d.Hash)
			}
		})
	}
	d := DiffOutcomes("r", wanting(nil, "a=1"), wanting(nil, "a=2"))
	if diff := d.Changed[0].Diff; !strings.Contains(diff, "--- sync\n+++ sync-shadow\n") || !strings.Contains(diff, "-  v: \"1\"\n+  v: \"2\"\n") ||
		strings.Contains(diff, v1alpha1.AnnotationAppliedHash) {
		t.Errorf("the changed child's diff:\n%s", diff)
	}
	if other := DiffOutcomes("r", wanting(nil, "a=1"), wanting(nil, "a=3")); other.Hash == d.Hash {
		t.Errorf("two differences share the hash %s", d.Hash)
	}
}

// show formats the parts of a difference that are set.
func show(d *bus.ShadowDiff) string {
	var parts []string
	if d.SyncRejected != nil {
		parts = append(parts, "sync rejected "+d.SyncRejected.Reason)
	}
	if d.ShadowRejected != nil {
		parts = append(parts, "shadow rejected "+d.ShadowRejected.Reason)
	}
	for name, keys := range map[string][]string{"added": d.Added, "removed": d.Removed} {
		if len(keys) > 0 {
			parts = append(parts, fmt.Sprintf("%s %v", name, keys))
		}
	}
	if len(d.Changed) > 0 {
		var keys []string
		for _, c := range d.Changed {
			keys = append(keys, c.Child)
		}
		parts = append(parts, fmt.Sprintf("changed %v", keys))
	}
	if len(d.Status) > 0 {
		parts = append(parts, fmt.Sprintf("status %v", d.Status))
	}
	return strings.Join(parts, "; ")
}
