package core

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"universalcontroller.dev/uc/schemas/hooks"
)

// TestComposeStatus: the hook's status is pruned to what the parent's
// schema declares, and uc's additions go in as far as it admits them.
func TestComposeStatus(t *testing.T) {
	schemaOf := func(status map[string]any) *StatusSchema {
		s, err := StatusSchemaOf(crdWithStatus(status), "v1")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	refused := schemaOf(openSchema)
	refused.RefuseAdditions()
	hook := map[string]any{"working": true, "actual_copies": int64(2), "extra": "x",
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Up"}}}
	synced := map[string]any{"type": "Synced", "status": "True", "reason": "Applied", "message": "the latest hook reply was applied",
		"observedGeneration": int64(3), "lastTransitionTime": "2025-01-01T00:00:00Z"}
	live := map[string]any{"working": false, "conditions": []any{synced}}
	whole := func(status map[string]any) map[string]any {
		out := runtime.DeepCopyJSON(status)
		out["observedGeneration"] = int64(3)
		out["conditions"] = append(out["conditions"].([]any), runtime.DeepCopyJSON(synced))
		return out
	}
	for _, tc := range []struct {
		name        string
		schema      *StatusSchema
		live, hook  map[string]any
		wantFull    map[string]any
		wantPruned  []string
		wantLeftOut []string
	}{
		{"closed status", schemaOf(closedSchema), live, hook,
			map[string]any{"working": true, "actual_copies": int64(2)},
			[]string{"status.conditions", "status.extra"}, []string{"status.conditions", "status.observedGeneration"}},
		{"conditions of type and status", schemaOf(narrowSchema), live, hook,
			map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}, map[string]any{"type": "Synced", "status": "True"}}},
			[]string{"status.actual_copies", "status.conditions[0].reason", "status.extra", "status.working"},
			[]string{"status.conditions[1].lastTransitionTime", "status.conditions[1].message", "status.conditions[1].observedGeneration",
				"status.conditions[1].reason", "status.observedGeneration"}},
		{"preserve unknown fields", schemaOf(openSchema), live, hook, whole(hook), nil, nil},
		{"unknown schema", &StatusSchema{}, live, hook, whole(hook), nil, nil},
		{"additions refused before", refused, live, hook, hook, nil, nil},
		{"no hook status: the live one", schemaOf(closedSchema), map[string]any{"working": false}, nil,
			map[string]any{"working": false}, nil, []string{"status.conditions", "status.observedGeneration"}},
		{"no hook status: still the generation looked at", schemaOf(openSchema), live, nil,
			map[string]any{"working": false, "observedGeneration": int64(3), "conditions": []any{synced}}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ComposeStatus(tc.schema, tc.live, tc.hook, 3, []metav1.Condition{SyncedCondition(3)})
			if !equality.Semantic.DeepEqual(got.Full, tc.wantFull) {
				t.Errorf("status %v, want %v", got.Full, tc.wantFull)
			}
			if !slices.Equal(got.Pruned, tc.wantPruned) {
				t.Errorf("pruned %q, want %q", got.Pruned, tc.wantPruned)
			}
			if !slices.Equal(got.LeftOut, tc.wantLeftOut) {
				t.Errorf("left out %q, want %q", got.LeftOut, tc.wantLeftOut)
			}
		})
	}
}

// TestComposeHookConditions: a reply's conditions go into the status as
// metav1.Conditions at the generation the hook saw, in the place of the
// live one of their type: its lastTransitionTime stays while its status
// does, and is now when the status changes or the condition is new. A
// reply with a status replaces the conditions, so one the hook no longer
// sends is gone; a reply without one keeps the live ones. The same reply
// again composes the live status: nothing to write. A schema without
// conditions leaves the hook's out, and says so.
func TestComposeHookConditions(t *testing.T) {
	schema, err := StatusSchemaOf(crdWithStatus(openSchema), "v1")
	if err != nil {
		t.Fatal(err)
	}
	closed, err := StatusSchemaOf(crdWithStatus(closedSchema), "v1")
	if err != nil {
		t.Fatal(err)
	}
	const then = "2025-01-01T00:00:00Z"
	cond := func(typ, status, reason, message string, generation int64, transition string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": message,
			"observedGeneration": generation, "lastTransitionTime": transition}
	}
	synced := cond("Synced", "True", "Applied", "the latest hook reply was applied", 3, then)
	live := map[string]any{"observedGeneration": int64(3), "conditions": []any{
		cond("Ready", "True", "AllUp", "3/3", 2, then),
		cond("Old", "True", "Stale", "sent by an older reply", 2, then),
		synced,
	}}
	start := time.Now().Add(-time.Second)
	for _, tc := range []struct {
		name   string
		status map[string]any // the reply's
		conds  []hooks.Condition
		want   []map[string]any // "now": a lastTransitionTime of the composition
	}{
		{"no status: set in place, others kept", nil, []hooks.Condition{
			{Type: "Ready", Status: "True", Reason: "AllUp", Message: "4/4"},
			{Type: "Degraded", Status: "False", Reason: "Healthy"},
		}, []map[string]any{
			cond("Ready", "True", "AllUp", "4/4", 3, then),
			cond("Old", "True", "Stale", "sent by an older reply", 2, then),
			synced,
			cond("Degraded", "False", "Healthy", "", 3, "now"),
		}},
		{"no status: a status changes", nil, []hooks.Condition{{Type: "Ready", Status: "False", Reason: "Down", Message: "0/3"}}, []map[string]any{
			cond("Ready", "False", "Down", "0/3", 3, "now"),
			cond("Old", "True", "Stale", "sent by an older reply", 2, then),
			synced,
		}},
		{"a status: the hook's conditions only", map[string]any{"conditions": []any{map[string]any{"type": "Mine", "status": "True"}}},
			[]hooks.Condition{{Type: "Ready", Status: "True", Reason: "AllUp", Message: "3/3"}}, []map[string]any{
				{"type": "Mine", "status": "True"},
				synced,
				cond("Ready", "True", "AllUp", "3/3", 3, then),
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conds := append([]metav1.Condition{SyncedCondition(3)}, hooks.MetaConditions(tc.conds, 3, metav1.Time{})...)
			got := ComposeStatus(schema, live, tc.status, 3, conds)
			list, _ := got.Full["conditions"].([]any)
			if len(list) != len(tc.want) {
				t.Fatalf("conditions %v, want %v", list, tc.want)
			}
			for i, c := range list {
				want := runtime.DeepCopyJSON(tc.want[i])
				if want["lastTransitionTime"] == "now" {
					at, err := time.Parse(time.RFC3339, fmt.Sprint(c.(map[string]any)["lastTransitionTime"]))
					if err != nil || at.Before(start.Truncate(time.Second)) {
						t.Errorf("condition %d: lastTransitionTime %v (%v), want now", i, at, err)
					}
					want["lastTransitionTime"] = c.(map[string]any)["lastTransitionTime"]
				}
				if !equality.Semantic.DeepEqual(c, want) {
					t.Errorf("condition %d: %v, want %v", i, c, want)
				}
			}
			if again := ComposeStatus(schema, got.Full, tc.status, 3, conds); !EqualJSON(got.Full, again.Full) {
				t.Errorf("the same reply again composes %v, not the live %v", again.Full, got.Full)
			}
			if out := HookConditionsLeftOut(got.Full, conds); out != nil {
				t.Errorf("conditions left out: %q", out)
			}
			leftOut := HookConditionsLeftOut(ComposeStatus(closed, live, tc.status, 3, conds).Full, conds)
			var want []string
			for _, c := range tc.conds {
				want = append(want, c.Type)
			}
			if !slices.Equal(leftOut, want) {
				t.Errorf("a closed schema leaves out %q, want %q", leftOut, want)
			}
		})
	}
}

// TestSetConditionKeepsForeignFields: uc sets a condition with
// meta.SetStatusCondition, in place, keeping the fields of the condition
// it replaces that a metav1.Condition does not have; a condition of
// another type is left as it is, even one that is no metav1.Condition.
func TestSetConditionKeepsForeignFields(t *testing.T) {
	const then = "2025-01-01T00:00:00Z"
	ready := map[string]any{"type": "Ready", "status": "True", "reason": "Up", "message": "3/3", "observedGeneration": int64(2),
		"lastTransitionTime": then, "lastProbeTime": "2025-01-02T00:00:00Z", "severity": "Info"}
	foreign := map[string]any{"type": "Scheduled", "status": "Unknown"} // no reason, no lastTransitionTime
	live := []any{foreign, ready}
	for _, tc := range []struct {
		name           string
		cond           metav1.Condition
		wantTransition string // "now": a lastTransitionTime of the call
	}{
		{"same status", metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Up", Message: "4/4", ObservedGeneration: 3}, then},
		{"status changes", metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Down", Message: "0/3", ObservedGeneration: 3}, "now"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now().Add(-time.Second)
			got := setCondition(runtime.DeepCopyJSONValue(live), live, tc.cond)
			if len(got) != 2 || !equality.Semantic.DeepEqual(got[0], foreign) {
				t.Fatalf("conditions %v, want %v first, unchanged", got, foreign)
			}
			set := got[1].(map[string]any)
			want := map[string]any{"type": "Ready", "status": string(tc.cond.Status), "reason": tc.cond.Reason, "message": tc.cond.Message,
				"observedGeneration": int64(3), "lastTransitionTime": tc.wantTransition, "lastProbeTime": "2025-01-02T00:00:00Z", "severity": "Info"}
			if tc.wantTransition == "now" {
				at, err := time.Parse(time.RFC3339, fmt.Sprint(set["lastTransitionTime"]))
				if err != nil || at.Before(start.Truncate(time.Second)) {
					t.Errorf("lastTransitionTime %v (%v), want now", set["lastTransitionTime"], err)
				}
				want["lastTransitionTime"] = set["lastTransitionTime"]
			}
			if !equality.Semantic.DeepEqual(set, want) {
				t.Errorf("condition %v, want %v", set, want)
			}
		})
	}
}

// crdWithStatus is a CRD for the test controller's parents whose status
// schema is status.
func crdWithStatus(status map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "parents.example.com"},
		"spec": map[string]any{"versions": []any{map[string]any{"name": "v1", "schema": map[string]any{
			"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{"status": status}},
		}}}},
	}}
}

func objectSchema(props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props}
}

var (
	str          = map[string]any{"type": "string"}
	closedSchema = objectSchema(map[string]any{"working": map[string]any{"type": "boolean"}, "actual_copies": map[string]any{"type": "integer"}})
	narrowSchema = objectSchema(map[string]any{"conditions": map[string]any{"type": "array", "items": objectSchema(map[string]any{"type": str, "status": str})}})
	openSchema   = map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
)
