package applier

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"universalcontroller.dev/uc/internal/registry"
)

// ConditionSynced is the condition uc keeps on every parent: True when the
// latest hook reply was applied, False with a reason naming the problem.
const ConditionSynced = "Synced"

func syncedCondition(generation int64) map[string]any {
	return condition(ConditionSynced, generation, "True", "Applied", "the latest hook reply was applied")
}

func failedCondition(generation int64, reason, message string) map[string]any {
	return condition(ConditionSynced, generation, "False", reason, message)
}

func condition(typ string, generation int64, status, reason, message string) map[string]any {
	return map[string]any{
		"type":               typ,
		"status":             status,
		"reason":             reason,
		"message":            message,
		"observedGeneration": generation,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}
}

// writeStatus sets the parent's status with server-side apply: the hook's
// status with observedGeneration, or — when status is nil — the live status
// unchanged, and in both cases uc's conditions (Synced, and Updated for a
// rollout). It writes nothing when the result equals the live status.
func (a *Applier) writeStatus(ctx context.Context, ctl *registry.Controller, parent *unstructured.Unstructured, status map[string]any, generation int64, conds ...map[string]any) error {
	live, _, _ := unstructured.NestedMap(parent.Object, "status")
	var next map[string]any
	if status != nil {
		next = runtime.DeepCopyJSON(status)
		next["observedGeneration"] = generation
	} else {
		next = runtime.DeepCopyJSON(live)
		if next == nil {
			next = map[string]any{}
		}
	}
	for _, cond := range conds {
		next["conditions"] = setCondition(next["conditions"], live["conditions"], cond)
	}
	if contains(live, next) && contains(next, live) {
		return nil
	}
	obj := parentConfig(parent)
	obj.Object["status"] = next
	_, err := a.dyn.Resource(ctl.Parent.GVR).Namespace(parent.GetNamespace()).
		ApplyStatus(ctx, parent.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager(ctl.Name), Force: true})
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

// deferStatus tells whether the status of a reply is better left to the
// sync that follows it. It is when the apply changed a child — the watcher
// sees the change and calls the hook again — and the hook's status differs
// from the live one, most likely because it reports what it observed, which
// the apply just changed: written now, it would be replaced by the next
// reply's, and its own watch event would cost one more hook call. A status
// is written at once when the hook left it as it was (only
// observedGeneration and uc's conditions move, and the next reply will not
// change them), and when one of the hook's conditions changes: a condition
// records a transition (a job Restarting), which the next reply may already
// have left behind. A parent's status is deferred at most once in a row, so
// a hook that changes a child on every call still gets its status written.
func (p *partition) deferStatus(parent *unstructured.Unstructured, status map[string]any, childChanged bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	uid := parent.GetUID()
	live, _ := parent.Object["status"].(map[string]any)
	if !childChanged || status == nil || p.deferred[uid] || sameHookStatus(live, status) || conditionChanged(live, status) {
		delete(p.deferred, uid)
		return false
	}
	p.deferred[uid] = true
	return true
}

// sameHookStatus compares the fields of two statuses that the hook sets
// besides its conditions: all but observedGeneration and conditions.
func sameHookStatus(a, b map[string]any) bool {
	strip := func(m map[string]any) map[string]any {
		out := make(map[string]any, len(m))
		for k, v := range m {
			if k != "observedGeneration" && k != "conditions" {
				out[k] = v
			}
		}
		return out
	}
	a, b = strip(a), strip(b)
	return contains(a, b) && contains(b, a)
}

// conditionChanged tells whether a condition of the hook's status has
// another status or reason than the live one of its type, or is new.
func conditionChanged(live, status map[string]any) bool {
	list, _ := status["conditions"].([]any)
	for _, c := range list {
		cond, ok := c.(map[string]any)
		if !ok {
			continue
		}
		old := findCondition(live["conditions"], cond["type"])
		if old == nil || old["status"] != cond["status"] || old["reason"] != cond["reason"] {
			return true
		}
	}
	return false
}

// setCondition puts cond into the conditions list by type, keeping the live
// lastTransitionTime when the condition's status did not change.
func setCondition(conditions, live any, cond map[string]any) []any {
	if old := findCondition(live, cond["type"]); old != nil && old["status"] == cond["status"] {
		cond["lastTransitionTime"] = old["lastTransitionTime"]
	}
	list, _ := conditions.([]any)
	out := make([]any, 0, len(list)+1)
	for _, c := range list {
		if m, ok := c.(map[string]any); !ok || m["type"] != cond["type"] {
			out = append(out, c)
		}
	}
	return append(out, cond)
}

func findCondition(conditions, typ any) map[string]any {
	list, _ := conditions.([]any)
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}
