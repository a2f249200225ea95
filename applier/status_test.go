package applier

import (
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	fakediscovery "k8s.io/client-go/discovery/fake"
	fakedynamic "k8s.io/client-go/dynamic/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/schemas/v1alpha1"
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
	schemaOf := func(status map[string]any) *registry.StatusSchema {
		s, err := registry.StatusSchemaOf(crdWithStatus(status), "v1")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	refused := schemaOf(openSchema)
	refused.RefuseAdditions()
	hook := map[string]any{"working": true, "actual_copies": int64(2), "extra": "x",
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Up"}}}
	synced := syncedCondition(3)
	synced["lastTransitionTime"] = "2025-01-01T00:00:00Z"
	live := map[string]any{"working": false, "conditions": []any{synced}}
	whole := func(status map[string]any) map[string]any {
		out := runtime.DeepCopyJSON(status)
		out["observedGeneration"] = int64(3)
		out["conditions"] = append(out["conditions"].([]any), runtime.DeepCopyJSON(synced))
		return out
	}
	for _, tc := range []struct {
		name        string
		schema      *registry.StatusSchema
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
		{"unknown schema", &registry.StatusSchema{}, live, hook, whole(hook), nil, nil},
		{"additions refused before", refused, live, hook, hook, nil, nil},
		{"no hook status: the live one", schemaOf(closedSchema), map[string]any{"working": false}, nil,
			map[string]any{"working": false}, nil, []string{"status.conditions", "status.observedGeneration"}},
		{"no hook status: still the generation looked at", schemaOf(openSchema), live, nil,
			map[string]any{"working": false, "observedGeneration": int64(3), "conditions": []any{synced}}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := composeStatus(tc.schema, tc.live, tc.hook, 3, []map[string]any{syncedCondition(3)})
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
			reg := registry.New(dyn, &fakediscovery.FakeDiscovery{Fake: &ktesting.Fake{}}, slog.New(slog.DiscardHandler))
			a := &Applier{reg: reg, dyn: dyn, tracer: tracing.Tracer(nil), events: rec, log: slog.New(slog.DiscardHandler)}
			for working := range 2 {
				err := a.writeStatus(t.Context(), ctl, parent, map[string]any{"working": working == 1}, 1, syncedCondition(1))
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

// fakeParent is the parent ns/p (uid "uid") of the test controller ctl on a
// fake apiserver that hands answer every status written to it, and answers
// with its error.
func fakeParent(ctl *registry.Controller, answer func(status map[string]any) error) (*unstructured.Unstructured, *fakedynamic.FakeDynamicClient) {
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
