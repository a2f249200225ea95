package core

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

func SyncedCondition(generation int64) metav1.Condition {
	return condition(v1alpha1.ConditionSynced, generation, metav1.ConditionTrue, v1alpha1.ReasonApplied, "the latest hook reply was applied")
}

func FailedCondition(generation int64, reason, message string) metav1.Condition {
	return condition(v1alpha1.ConditionSynced, generation, metav1.ConditionFalse, reason, message)
}

// condition is one of uc's conditions; setCondition gives it its
// lastTransitionTime.
func condition(typ string, generation int64, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation}
}

func EqualJSON(a, b map[string]any) bool { return Contains(a, b) && Contains(b, a) }

// Composed is the status uc writes on a parent, against its schema.
type Composed struct {
	Hook    map[string]any // the hook's status (or the live one), as the schema keeps it
	Full    map[string]any // hook with the additions the schema admits
	Pruned  []string       // the hook's fields the schema does not declare
	LeftOut []string       // uc's additions the schema does not admit
}

// ComposeStatus works out the status of a parent: the hook's (nil: the
// live one) with observedGeneration (for the hook's) and conds, each kept
// where the schema admits it. An addition the schema admits in part (a
// condition whose item schema is {type, status}) goes in as far as it
// does.
func ComposeStatus(schema *StatusSchema, live, status map[string]any, generation int64, conds []metav1.Condition) Composed {
	var c Composed
	if status != nil {
		c.Hook = runtime.DeepCopyJSON(status)
	} else {
		c.Hook = runtime.DeepCopyJSON(live)
		if c.Hook == nil {
			c.Hook = map[string]any{}
		}
	}
	c.Pruned = schema.Prune(c.Hook)
	if schema.AdditionsRefused() {
		c.Full = c.Hook
		return c
	}
	c.Full = runtime.DeepCopyJSON(c.Hook)
	if generation > 0 { // the generation uc last looked at, whatever the reply
		c.Full["observedGeneration"] = generation
	}
	for _, cond := range conds {
		c.Full["conditions"] = setCondition(c.Full["conditions"], live["conditions"], cond)
	}
	c.LeftOut = schema.Prune(c.Full)
	return c
}

// SameHookStatus compares the fields of two statuses that the hook sets
// besides its conditions: all but observedGeneration and conditions.
func SameHookStatus(a, b map[string]any) bool {
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
	return Contains(a, b) && Contains(b, a)
}

// HookConditions are the conditions of a reply: those of its status, and
// those it sets (Conditions), as a status holds them.
func HookConditions(resp *hooks.SyncResponse) []any {
	list, _ := resp.Status["conditions"].([]any)
	list = slices.Clone(list)
	for _, c := range resp.Conditions {
		list = append(list, map[string]any{"type": c.Type, "status": c.Status, "reason": c.Reason})
	}
	return list
}

// ConditionChanged tells whether one of the hook's conditions has another
// status or reason than the live one of its type, or is new.
func ConditionChanged(live map[string]any, conditions []any) bool {
	for _, c := range conditions {
		cond, ok := c.(map[string]any)
		if !ok {
			continue
		}
		old := FindCondition(live["conditions"], cond["type"])
		if old == nil || old["status"] != cond["status"] || old["reason"] != cond["reason"] {
			return true
		}
	}
	return false
}

// setCondition sets cond in the conditions list, in the place of the one
// of its type or at its end, with meta.SetStatusCondition: its
// lastTransitionTime is the live condition's of its type, unless its status
// changes (or the live one has none), then now.
//
// The list stays unstructured, not a []metav1.Condition: it is the hook's
// status's (or the live one's), and a CRD's conditions need not be
// metav1.Conditions — one may lack a field metav1.Condition requires, or
// carry fields it does not have (a lastProbeTime, a severity). Read into
// []metav1.Condition and written back, every condition would gain empty
// fields and lose its own. So only cond, with the live condition of its
// type, goes through meta.SetStatusCondition; the other conditions are
// left as they are, and so are the fields of the one cond replaces that
// metav1.Condition does not have.
func setCondition(conditions, live any, cond metav1.Condition) []any {
	var current []metav1.Condition
	if old, ok := asCondition(FindCondition(live, cond.Type)); ok && !old.LastTransitionTime.IsZero() {
		current = append(current, old)
	}
	meta.SetStatusCondition(&current, cond)
	set, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&current[0]) // a metav1.Condition always converts
	list, _ := conditions.([]any)
	out := slices.Clone(list)
	i := slices.IndexFunc(out, func(c any) bool { m, ok := c.(map[string]any); return ok && m["type"] == cond.Type })
	if i < 0 {
		return append(out, set)
	}
	for k, v := range out[i].(map[string]any) {
		if !conditionFields.Has(k) {
			set[k] = v
		}
	}
	out[i] = set
	return out
}

// conditionFields are the fields of a metav1.Condition, as a status holds
// them.
var conditionFields = sets.New("type", "status", "observedGeneration", "lastTransitionTime", "reason", "message")

// asCondition reads a condition of a status as a metav1.Condition; false
// when it is not one.
func asCondition(m map[string]any) (metav1.Condition, bool) {
	var c metav1.Condition
	if m == nil || runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) != nil {
		return c, false
	}
	return c, true
}

// HookConditionsLeftOut are the types of the hook's conditions among conds
// (all but uc's own) that status, as the schema admits it, lacks.
func HookConditionsLeftOut(status map[string]any, conds []metav1.Condition) []string {
	var out []string
	for _, c := range conds {
		if c.Type != v1alpha1.ConditionSynced && c.Type != v1alpha1.ConditionUpdated && FindCondition(status["conditions"], c.Type) == nil {
			out = append(out, c.Type)
		}
	}
	return out
}

func FindCondition(conditions, typ any) map[string]any {
	list, _ := conditions.([]any)
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// ReplyConditions are the conditions a reply's apply sets: uc's Synced,
// and the hook's.
func ReplyConditions(resp *hooks.SyncResponse, generation int64) []metav1.Condition {
	return append([]metav1.Condition{SyncedCondition(generation)}, hooks.MetaConditions(resp.Conditions, generation, metav1.Time{})...)
}
