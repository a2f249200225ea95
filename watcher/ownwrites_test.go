package watcher

import (
	"log/slog"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"universalcontroller.dev/uc/schemas/bus"
)

// parentAt is an Echo-like parent at a resourceVersion, with that status
// (nil: none).
func parentAt(rv string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "e2e/v1", "kind": "Echo",
		"metadata": map[string]any{"name": "p", "namespace": "ns", "resourceVersion": rv, "generation": int64(2),
			"labels": map[string]any{"app": "a"}},
		"spec": map[string]any{"message": "hi"},
	}}
	if status != nil {
		u.Object["status"] = runtime.DeepCopyJSON(status)
	}
	return u
}

func cond(typ, status, reason, message string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message, "observedGeneration": int64(2)}
}

// TestChangedNotByUC: an update of a parent that changed only what uc
// writes to report on it — its Synced and Updated conditions,
// observedGeneration, the resourceVersion and managedFields — is not
// synced; any other change is, the hook's own status and conditions
// included.
func TestChangedNotByUC(t *testing.T) {
	hookStatus := map[string]any{"message": "hi", "conditions": []any{cond("Ready", "True", "Done", "")}}
	withUC := func(status map[string]any, conds ...any) map[string]any {
		s := runtime.DeepCopyJSON(status)
		if s == nil {
			s = map[string]any{}
		}
		list, _ := s["conditions"].([]any)
		s["conditions"] = append(list, conds...)
		s["observedGeneration"] = int64(2)
		return s
	}
	failed := cond("Synced", "False", "HookFailed", "sync hook failed, will retry: Timeout")
	for _, tt := range []struct {
		name    string
		o, n    *unstructured.Unstructured
		changed bool
	}{
		{"an informer's resync", parentAt("5", hookStatus), parentAt("5", hookStatus), false},
		{"uc's first report, on a parent without a status", parentAt("5", nil), parentAt("6", withUC(nil, failed)), false},
		{"Synced turns False", parentAt("5", withUC(hookStatus, cond("Synced", "True", "Applied", ""))), parentAt("6", withUC(hookStatus, failed)), false},
		{"Synced says another failure", parentAt("5", withUC(hookStatus, failed)),
			parentAt("6", withUC(hookStatus, cond("Synced", "False", "InvalidHookReply", "rejected"))), false},
		{"Updated moves", parentAt("5", withUC(hookStatus, cond("Updated", "False", "RolloutProgressing", "1 of 3"))),
			parentAt("6", withUC(hookStatus, cond("Updated", "False", "RolloutProgressing", "2 of 3"))), false},
		{"observedGeneration alone", parentAt("5", map[string]any{"message": "hi", "observedGeneration": int64(1)}),
			parentAt("6", map[string]any{"message": "hi", "observedGeneration": int64(2)}), false},
		{"managedFields alone", parentAt("5", hookStatus), func() *unstructured.Unstructured {
			u := parentAt("6", hookStatus)
			u.Object["metadata"].(map[string]any)["managedFields"] = []any{map[string]any{"manager": "uc/c"}}
			return u
		}(), false},
		{"the hook's status", parentAt("5", withUC(hookStatus, failed)), parentAt("6", withUC(map[string]any{"message": "bye"}, failed)), true},
		{"the hook's condition", parentAt("5", withUC(hookStatus, failed)),
			parentAt("6", withUC(map[string]any{"conditions": []any{cond("Ready", "False", "Waiting", "")}, "message": "hi"}, failed)), true},
		{"a condition of another", parentAt("5", hookStatus),
			parentAt("6", map[string]any{"message": "hi", "conditions": []any{cond("Ready", "True", "Done", ""), cond("Healthy", "True", "", "")}}), true},
		{"conditions that are not a list", parentAt("5", map[string]any{"conditions": "none"}), parentAt("6", map[string]any{"conditions": "some"}), true},
		{"the spec", parentAt("5", hookStatus), func() *unstructured.Unstructured {
			u := parentAt("6", hookStatus)
			u.Object["spec"] = map[string]any{"message": "bye"}
			return u
		}(), true},
		{"a label", parentAt("5", hookStatus), func() *unstructured.Unstructured {
			u := parentAt("6", hookStatus)
			u.SetLabels(map[string]string{"app": "b"})
			return u
		}(), true},
		{"the status goes", parentAt("5", hookStatus), parentAt("6", nil), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := changedNotByUC(tt.o, tt.n); got != tt.changed {
				t.Errorf("changedNotByUC = %v, want %v", got, tt.changed)
			}
		})
	}
}

// TestFailureReported: uc reported a failure when the Synced condition
// turns False, or says another reason or message than before.
func TestFailureReported(t *testing.T) {
	failed := cond("Synced", "False", "HookFailed", "sync hook failed, will retry: Timeout")
	for _, tt := range []struct {
		name     string
		o, n     map[string]any
		reported bool
	}{
		{"the first report", nil, map[string]any{"conditions": []any{failed}}, true},
		{"Synced turns False", map[string]any{"conditions": []any{cond("Synced", "True", "Applied", "")}}, map[string]any{"conditions": []any{failed}}, true},
		{"another failure", map[string]any{"conditions": []any{failed}},
			map[string]any{"conditions": []any{cond("Synced", "False", "InvalidHookReply", "rejected")}}, true},
		{"the same failure", map[string]any{"conditions": []any{failed}}, map[string]any{"conditions": []any{failed}, "observedGeneration": int64(2)}, false},
		{"Synced turns True", map[string]any{"conditions": []any{failed}}, map[string]any{"conditions": []any{cond("Synced", "True", "Applied", "")}}, false},
		{"no Synced condition", nil, map[string]any{"observedGeneration": int64(2)}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := failureReported(parentAt("5", tt.o), parentAt("6", tt.n)); got != tt.reported {
				t.Errorf("failureReported = %v, want %v", got, tt.reported)
			}
		})
	}
}

// TestOwnStatusEndsWriteWait: uc's own status on a parent, which syncs
// nothing, ends the wait for an apply's writes when it is the last of
// them to be seen, and queues the sync the wait deferred — rather than
// leaving it to the wait's deadline.
func TestOwnStatusEndsWriteWait(t *testing.T) {
	key := parentKey{Controller: "ctl", Namespace: "ns", Name: "p"}
	wrote := []bus.Written{{Group: "e2e", Version: "v1", Resource: "echoes", Namespace: "ns", Name: "p", ResourceVersion: "6"}}
	for _, tt := range []struct {
		name       string
		seen       bool
		wantQueued []queuedSync
	}{
		{"the status was the last write", true, []queuedSync{{key, false}}},
		{"a write is still unseen", false, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := &queued{}
			w := &Watcher{reg: unregistered{}, log: slog.New(slog.DiscardHandler)}
			w.applying = writeWaits{sync: q.sync, log: w.log}
			t0 := time.Now()
			unseen := func(string, []bus.Written) bool { return false }
			w.applying.start(key, t0)
			w.applying.end(key, wrote, t0, unseen)
			w.applying.awaiting(key, false, t0, unseen) // a child's event, deferred
			if !tt.seen {
				w.applying.check(key, unseen)
			} else {
				// The registry does not know ctl: every write counts as seen.
				status := map[string]any{"observedGeneration": int64(2), "conditions": []any{cond("Synced", "True", "Applied", "")}}
				w.parentHandler("ctl", changedNotByUC).OnUpdate(parentAt("5", nil), parentAt("6", status))
			}
			if !reflect.DeepEqual(q.syncs, tt.wantQueued) {
				t.Fatalf("syncs queued %+v, want %+v", q.syncs, tt.wantQueued)
			}
			if _, waiting := w.applying.byKey[key]; waiting == tt.seen {
				t.Errorf("wait still there: %v, want %v", waiting, !tt.seen)
			}
			w.applying.mu.Lock()
			for _, h := range w.applying.byKey {
				h.deadline.Stop()
			}
			w.applying.mu.Unlock()
		})
	}
}
