package applier

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	fakedynamic "k8s.io/client-go/dynamic/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestDeferStatus: the status of a reply whose apply changed a child is left
// to the next reply when the hook changed it but none of its conditions (of
// its status, or set by the reply), written at once otherwise, and never
// deferred twice in a row.
func TestDeferStatus(t *testing.T) {
	live := map[string]any{"children": int64(5), "observedGeneration": int64(1),
		"conditions": []any{map[string]any{"type": "Synced", "status": "True"}}}
	liveReady := map[string]any{"children": int64(5), "conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Up"}}}
	for _, tt := range []struct {
		name         string
		live, status map[string]any
		conds        []hooks.Condition // the conditions the reply sets
		childChanged bool
		deferredLast bool
		want         bool
	}{
		{"a child changed and the hook's status too", live, map[string]any{"children": 4}, nil, true, false, true},
		{"first status of a new parent", nil, map[string]any{"children": 0}, nil, true, false, true},
		{"no child changed", live, map[string]any{"children": 4}, nil, false, false, false},
		{"the hook's status is unchanged", live, map[string]any{"children": 5}, nil, true, false, false},
		{"only the hook's conditions differ", live, map[string]any{"children": 5, "conditions": []any{}}, nil, true, false, false},
		{"a condition of the hook's is new", live, map[string]any{"children": 4,
			"conditions": []any{map[string]any{"type": "Restarting", "status": "True"}}}, nil, true, false, false},
		{"a condition of the hook's changes", live, map[string]any{"children": 4,
			"conditions": []any{map[string]any{"type": "Synced", "status": "False"}}}, nil, true, false, false},
		{"the hook's conditions stay", live, map[string]any{"children": 4,
			"conditions": []any{map[string]any{"type": "Synced", "status": "True"}}}, nil, true, false, true},
		{"a condition the reply sets is new", live, map[string]any{"children": 4},
			[]hooks.Condition{{Type: "Restarting", Status: "True", Reason: "Crashed"}}, true, false, false},
		{"a condition the reply sets stays", liveReady, map[string]any{"children": 4},
			[]hooks.Condition{{Type: "Ready", Status: "True", Reason: "Up", Message: "another message"}}, true, false, true},
		{"a condition the reply sets changes", liveReady, map[string]any{"children": 4},
			[]hooks.Condition{{Type: "Ready", Status: "False", Reason: "Down"}}, true, false, false},
		{"no status in the reply", live, nil, nil, true, false, false},
		{"deferred the last time", live, map[string]any{"children": 4}, nil, true, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := &knownParents{deferred: map[types.UID]bool{}}
			parent := &unstructured.Unstructured{Object: map[string]any{}}
			parent.SetUID("uid")
			if tt.live != nil {
				parent.Object["status"] = tt.live
			}
			k.deferred["uid"] = tt.deferredLast
			reply := &hooks.SyncResponse{Status: tt.status, Conditions: tt.conds}
			if got := k.deferStatus(parent, reply, tt.childChanged); got != tt.want {
				t.Errorf("deferStatus = %v, want %v", got, tt.want)
			}
			if again := k.deferStatus(parent, reply, tt.childChanged); again && tt.want {
				t.Error("deferred twice in a row")
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

// TestComposeStatus: the hook's status is pruned to what the parent's
// schema declares, and uc's additions go in as far as it admits them.
func TestComposeStatus(t *testing.T) {
	schemaOf := func(status map[string]any) *core.StatusSchema {
		s, err := core.StatusSchemaOf(crdWithStatus(status), "v1")
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
		schema      *core.StatusSchema
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
		{"unknown schema", &core.StatusSchema{}, live, hook, whole(hook), nil, nil},
		{"additions refused before", refused, live, hook, hook, nil, nil},
		{"no hook status: the live one", schemaOf(closedSchema), map[string]any{"working": false}, nil,
			map[string]any{"working": false}, nil, []string{"status.conditions", "status.observedGeneration"}},
		{"no hook status: still the generation looked at", schemaOf(openSchema), live, nil,
			map[string]any{"working": false, "observedGeneration": int64(3), "conditions": []any{synced}}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := composeStatus(tc.schema, tc.live, tc.hook, 3, []metav1.Condition{syncedCondition(3)})
			if !equality.Semantic.DeepEqual(got.full, tc.wantFull) {
				t.Errorf("status %v, want %v", got.full, tc.wantFull)
			}
			if !slices.Equal(got.pruned, tc.wantPruned) {
				t.Errorf("pruned %q, want %q", got.pruned, tc.wantPruned)
			}
			if !slices.Equal(got.leftOut, tc.wantLeftOut) {
				t.Errorf("left out %q, want %q", got.leftOut, tc.wantLeftOut)
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
	schema, err := core.StatusSchemaOf(crdWithStatus(openSchema), "v1")
	if err != nil {
		t.Fatal(err)
	}
	closed, err := core.StatusSchemaOf(crdWithStatus(closedSchema), "v1")
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
			conds := append([]metav1.Condition{syncedCondition(3)}, hooks.MetaConditions(tc.conds, 3, metav1.Time{})...)
			got := composeStatus(schema, live, tc.status, 3, conds)
			list, _ := got.full["conditions"].([]any)
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
			if again := composeStatus(schema, got.full, tc.status, 3, conds); !equalJSON(got.full, again.full) {
				t.Errorf("the same reply again composes %v, not the live %v", again.full, got.full)
			}
			if out := hookConditionsLeftOut(got.full, conds); out != nil {
				t.Errorf("conditions left out: %q", out)
			}
			leftOut := hookConditionsLeftOut(composeStatus(closed, live, tc.status, 3, conds).full, conds)
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

// TestWriteStatusRefused: a status the apiserver refuses with uc's
// additions is written without them (and then at once without them), one
// it refuses all the same is reported and does not fail the apply, and an
// error worth a retry fails it.
func TestWriteStatusRefused(t *testing.T) {
	ctl := testController(v1alpha1.ChildUpdateInPlace)
	notDeclared := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonUnknown,
		Message: "failed to create typed patch object (/p; example.com/v1, Kind=Parent): .status.conditions: field not declared in schema"}}
	invalid := apierrors.NewInvalid(ctl.Parent.GVK.GroupKind(), "p", field.ErrorList{field.Invalid(field.NewPath("status", "working"), "yes", "must be a boolean")})
	for _, tc := range []struct {
		name       string
		refuse     func(status map[string]any) error // the apiserver's answer to a status
		wantErr    bool
		wantWrites [][]string // the fields of each status written, per writeStatus call
		wantEvents []string
	}{
		{"uc's additions refused", func(s map[string]any) error {
			if _, ok := s["conditions"]; ok {
				return notDeclared
			}
			return nil
		}, false, [][]string{{"conditions", "observedGeneration", "working"}, {"working"}, {"working"}}, nil},
		{"the hook's status refused", func(map[string]any) error { return invalid }, false,
			[][]string{{"conditions", "observedGeneration", "working"}, {"working"}, {"conditions", "observedGeneration", "working"}, {"working"}},
			[]string{"Warning StatusWriteFailed", "Warning StatusWriteFailed"}},
		{"apiserver unavailable", func(map[string]any) error { return apierrors.NewServiceUnavailable("try later") }, true,
			[][]string{{"conditions", "observedGeneration", "working"}, {"conditions", "observedGeneration", "working"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var writes [][]string
			parent, dyn := fakeParent(ctl, func(status map[string]any) error {
				writes = append(writes, slices.Sorted(maps.Keys(status)))
				return tc.refuse(status)
			})
			rec := record.NewFakeRecorder(10)
			rc := testReconciler(dyn, rec)
			for working := range 2 {
				err := rc.writeStatus(t.Context(), ctl, parent, map[string]any{"working": working == 1}, 1, syncedCondition(1))
				if (err != nil) != tc.wantErr {
					t.Fatalf("writeStatus: %v, want an error: %v", err, tc.wantErr)
				}
			}
			if !slices.EqualFunc(writes, tc.wantWrites, slices.Equal) {
				t.Errorf("writes %q, want %q", writes, tc.wantWrites)
			}
			close(rec.Events)
			var events []string
			for e := range rec.Events {
				events = append(events, strings.Join(strings.Fields(e)[:2], " "))
			}
			if !slices.Equal(events, tc.wantEvents) {
				t.Errorf("events %q, want %q", events, tc.wantEvents)
			}
		})
	}
}

// testReconciler is a reconciler of parents on dyn, with a registry
// never started, recording uc's Events in events.
func testReconciler(dyn dynamic.Interface, events record.EventRecorder) *reconciler {
	reg := registry.New(dyn, &fakediscovery.FakeDiscovery{Fake: &ktesting.Fake{}}, slog.New(slog.DiscardHandler))
	return &reconciler{reg: reg, dyn: dyn, events: events, tracer: tracing.Tracer(nil), log: slog.New(slog.DiscardHandler),
		observer: nobody{}, shadowObserver: nobody{}}
}

// fakeParent is the parent ns/p (uid "uid") of the test controller ctl on a
// fake apiserver that hands answer every status written to it, and answers
// with its error.
func fakeParent(ctl *core.Controller, answer func(status map[string]any) error) (*unstructured.Unstructured, *fakedynamic.FakeDynamicClient) {
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("uid")
	dyn := fakedynamic.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{ctl.Parent.GVR: "ParentList", v1alpha1.Resource: "UniversalControllerList"}, parent)
	dyn.PrependReactor("patch", ctl.Parent.GVR.Resource, func(action ktesting.Action) (bool, runtime.Object, error) {
		var obj map[string]any
		if err := json.Unmarshal(action.(ktesting.PatchAction).GetPatch(), &obj); err != nil {
			return true, nil, err
		}
		status, _ := obj["status"].(map[string]any)
		return true, parent, answer(status)
	})
	return parent, dyn
}
