package applier

import (
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

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
	"universalcontroller.dev/uc/core/coretest"
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

// TestWriteStatusRefused: a status the apiserver refuses with uc's
// additions is written without them (and then at once without them), one
// it refuses all the same is reported and does not fail the apply, and an
// error worth a retry fails it.
func TestWriteStatusRefused(t *testing.T) {
	ctl := coretest.Controller(v1alpha1.ChildUpdateInPlace)
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
				err := rc.writeStatus(t.Context(), ctl, parent, map[string]any{"working": working == 1}, 1, core.SyncedCondition(1))
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
